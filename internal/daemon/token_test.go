package daemon

import (
	"sync/atomic"
	"testing"
	"time"
)

// The sleeper token of an application's waiters is never lost: a parked
// waiter that is woken by the token (tokFree) but finds its own condition
// met returns, and must hand the token on, or the other parked waiters stay
// parked with nobody polling the rings for them (their frames sit in the RX
// ring; seen once as TestConcurrentCalls timing out). Here W2 and W3 are
// parked behind a stand-in sleeper that leaves; W2's condition and
// notification arrive with the token, and W2, first in line, takes it.
// W3's condition comes later and needs a poller: W3 must return.
func TestSleeperTokenPassedOn(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	c := h.attach()
	c.cfg.SpinFor = 0
	for round := 0; round < 20; round++ {
		var ready2, ready3 atomic.Bool
		ch2, ch3 := make(chan struct{}, 1), make(chan struct{}, 1)
		c.sleeping.Store(true) // a sleeper everybody else parks behind
		done2, done3 := make(chan error, 1), make(chan error, 1)
		dl := time.Now().Add(3 * time.Second)
		// W2 parks first, so it is first in line for the token (a channel
		// hands a sent value to its longest-waiting receiver).
		go func() { done2 <- c.waitFor(ready2.Load, ch2, nil, dl, nil) }()
		for c.parked.Load() < 1 {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(time.Millisecond) // W2 blocked in its select
		go func() { done3 <- c.waitFor(ready3.Load, ch3, nil, dl, nil) }()
		for c.parked.Load() < 2 {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(time.Millisecond)
		// The sleeper leaves (as waitFor does: token back, then tokFree
		// for the parked), and W2's socket got data meanwhile.
		ready2.Store(true)
		c.sleeping.Store(false)
		signalChan(c.tokFree)
		signalChan(ch2)
		if err := <-done2; err != nil {
			t.Fatalf("round %d: W2: %v", round, err)
		}
		ready3.Store(true) // W3's data arrives; only a poller can tell it
		select {
		case err := <-done3:
			if err != nil {
				t.Fatalf("round %d: W3: %v", round, err)
			}
		case <-time.After(time.Second):
			t.Fatalf("round %d: W3 stayed parked with no sleeper (token lost: sleeping %v, parked %d)", round, c.sleeping.Load(), c.parked.Load())
		}
		for c.sleeping.Load() || c.parked.Load() != 0 {
			time.Sleep(100 * time.Microsecond)
		}
		select { // leftover token from this round
		case <-c.tokFree:
		default:
		}
	}
}

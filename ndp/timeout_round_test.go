package ndp

import (
	"errors"
	"testing"
	"time"
)

// A peer that goes silent with a whole window in flight: the packets were sent
// microseconds apart, so their RTOs expire over many timer calls, but each RTO interval
// is one timeout round. The connection must give up after about MaxRTORetries RTOs of
// silence, not after MaxRTORetries timer calls.
func TestTimeoutCountsRoundsNotTimerCalls(t *testing.T) {
	const retries = 5
	rto := time.Millisecond
	a := mkEP(t, ipA, func(c *Config) {
		c.RTO = rto
		c.MaxRTORetries = retries
		c.IW = 64
		c.StallTimeout = 100 * time.Millisecond
	})
	b := mkEP(t, ipB, nil)
	h, _ := dialWrite(t, a, b, 64*a.MSS(), DialOptions{})
	// Send the window with packets spaced 1 µs apart; the peer never answers.
	now := Time(0)
	for {
		n, _ := a.PollFrame(make([]byte, 10000), now, true)
		if n == 0 {
			break
		}
		now += Time(time.Microsecond)
	}
	var closedAt Time
	var closeErr error
	for i := 0; i < 100000 && closedAt == 0; i++ {
		at, ok := a.NextTimer()
		if !ok {
			t.Fatal("no timer armed while packets are unacknowledged")
		}
		now = max(now, at)
		a.HandleTimers(now)
		for {
			ev, ok := a.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == EventClosed && ev.Handle == h {
				closedAt, closeErr = now, ev.Err
			}
		}
		// Retransmissions go out (and vanish) like the first window did.
		for {
			n, _ := a.PollFrame(make([]byte, 10000), now, true)
			if n == 0 {
				break
			}
		}
	}
	if !errors.Is(closeErr, ErrTimeout) {
		t.Fatalf("closed with %v, want ErrTimeout", closeErr)
	}
	if min := Time(retries) * Time(rto); closedAt < min {
		t.Fatalf("gave up after %v of silence, want at least %d RTOs (%v)", time.Duration(closedAt), retries, time.Duration(min))
	}
	if max := Time(retries+3) * Time(rto); closedAt > max {
		t.Fatalf("gave up only after %v, want about %d RTOs", time.Duration(closedAt), retries)
	}
}

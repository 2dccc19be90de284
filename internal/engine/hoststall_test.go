package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// A spinning waiter that finds the stack unpolled for a long gap between
// two of its polls tells the endpoint (ndp.Endpoint.NoteStall: the host
// was not running). The gap between one call and the next, when nothing
// waited, is not a stall.
func TestSpinnerReportsHostStall(t *testing.T) {
	var clock atomic.Int64 // ns; each reading advances it 1 µs
	a, _, _, _ := memPair(t, PollBusy, func(c *Config) {
		c.NoBackground = true
		c.Clock = func() ndp.Time { return ndp.Time(clock.Add(int64(time.Microsecond))) }
	})
	c, err := a.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("request"), false, nil); err != nil {
		t.Fatal(err)
	}
	// read spins in Read (the peer is never polled, so nothing arrives);
	// jump, if set, advances the clock 2 ms while it spins.
	read := func(jump bool) {
		t.Helper()
		cancel := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 64), cancel)
			done <- err
		}()
		spinFor := func(readings int64) {
			for start := clock.Load(); clock.Load()-start < readings*int64(time.Microsecond); {
				time.Sleep(100 * time.Microsecond)
			}
		}
		spinFor(100)
		if jump {
			clock.Add(int64(2 * time.Millisecond))
		}
		spinFor(100)
		close(cancel)
		if err := <-done; err == nil {
			t.Fatal("Read returned data from a peer nobody polls")
		}
	}
	stalls := func() uint64 { return a.Stats().Endpoint.HostStalls }

	read(false)
	if n := stalls(); n != 0 {
		t.Fatalf("a spin with no gap: %d host stalls, want 0", n)
	}
	read(true)
	if n := stalls(); n != 1 {
		t.Fatalf("a 2 ms gap while spinning: %d host stalls, want 1", n)
	}
	clock.Add(int64(2 * time.Millisecond)) // between calls: nobody waits
	read(false)
	if n := stalls(); n != 1 {
		t.Fatalf("a 2 ms gap between calls: %d host stalls, want still 1", n)
	}
}

// PollLoop reports a stall the same way when its caller says it came round
// at once (spun), and not after the caller's own sleep.
func TestPollLoopReportsHostStall(t *testing.T) {
	var now ndp.Time = 1
	a, _, _, _ := memPair(t, PollBusy, func(c *Config) {
		c.NoBackground = true
		c.Clock = func() ndp.Time { return now }
	})
	stalls := func() uint64 { return a.Stats().Endpoint.HostStalls }
	a.PollLoop(false, false)
	now += ndp.Time(2 * time.Millisecond)
	a.PollLoop(false, false) // after a sleep of the loop's own
	if n := stalls(); n != 0 {
		t.Fatalf("a gap the loop slept through: %d host stalls, want 0", n)
	}
	now += ndp.Time(2 * time.Millisecond)
	a.PollLoop(true, true)
	if n := stalls(); n != 1 {
		t.Fatalf("a gap while the loop spun: %d host stalls, want 1", n)
	}
}

package ndp

import (
	"errors"
	"testing"
	"time"
)

// A peer that goes silent with a whole window in flight: the packets were sent
// microseconds apart, so their RTOs expire over many timer calls, but each RTO interval
// is one timeout round. The connection must give up after about MaxRTORetries RTOs of
// silence, not after MaxRTORetries timer calls. With the adaptive RTO each round
// doubles the RTO (backoff, up to MaxRTO), so the silence lasts the sum of the
// backed-off RTOs; with FixedRTO, MaxRTORetries+1 RTOs.
func TestTimeoutCountsRoundsNotTimerCalls(t *testing.T) {
	const retries = 5
	rto := time.Millisecond
	for _, tc := range []struct {
		name     string
		fixed    bool
		maxRTO   time.Duration
		min, max time.Duration
	}{
		{"fixed", true, 0, retries * rto, (retries + 3) * rto},
		// rounds at 1, 3, 7, 15, 31, 63 ms: the sixth exceeds MaxRTORetries
		{"backoff", false, 0, 63 * rto, 66 * rto},
		// doubling stops at MaxRTO: 1, 3, 7, 11, 15, 19 ms
		{"backoff capped", false, 4 * rto, 19 * rto, 22 * rto},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testTimeoutRounds(t, retries, rto, tc.fixed, tc.maxRTO, tc.min, tc.max)
		})
	}
}

func testTimeoutRounds(t *testing.T, retries int, rto time.Duration, fixed bool, maxRTO, lo, hi time.Duration) {
	a := mkEP(t, ipA, func(c *Config) {
		c.RTO = rto
		c.MaxRTO = maxRTO
		c.FixedRTO = fixed
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
	if closedAt < Time(lo) {
		t.Fatalf("gave up after %v of silence, want at least %v", time.Duration(closedAt), lo)
	}
	if closedAt > Time(hi) {
		t.Fatalf("gave up only after %v, want at most %v", time.Duration(closedAt), hi)
	}
	if span := a.cfg.retrySpan(); time.Duration(closedAt) > span {
		t.Fatalf("gave up after %v, beyond the documented bound %v", time.Duration(closedAt), span)
	}
}

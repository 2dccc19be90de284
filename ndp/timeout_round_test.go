package ndp

import (
	"testing"
	"time"
)

// A peer that goes silent with a whole window in flight: the packets were sent
// microseconds apart, so their RTOs expire over many timer calls, but each RTO
// interval is one timeout round, and a round doubles the RTO once (backoff), not
// once per timer call.
func TestTimeoutCountsRoundsNotTimerCalls(t *testing.T) {
	rto := time.Millisecond
	a := mkEP(t, ipA, func(c *Config) {
		c.RTO = rto
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
	calls := 0
	// The first packet's RTO expires at 1ms and doubles the RTO; the others
	// expire by 2ms + 64µs, in the same round.
	for end := 2*Time(rto) + now; ; {
		at, ok := a.NextTimer()
		if !ok {
			t.Fatal("no timer armed while packets are unacknowledged")
		}
		if at > end {
			break
		}
		now = max(now, at)
		a.HandleTimers(now)
		calls++
	}
	info, _ := a.RTT(h)
	if st := a.Stats(); st.RTOFires != 64 || info.Backoff != 1 {
		t.Fatalf("after %d timer calls: %d RTO fires, backoff %d; want 64 fires, one round", calls, st.RTOFires, info.Backoff)
	}
}

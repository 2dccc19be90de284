package ndp

import (
	"testing"
	"time"
)

// A host stall of RTO/4 or more (NoteStall) is remembered for every
// connection as a late peer is: the RTO is at least twice the stall, halved
// every second, so a packet sent before the stall is not declared lost
// while its peer, stalled as long, has not answered yet. Shorter stalls and
// FixedRTO change nothing.
func TestHostStallRaisesRTO(t *testing.T) {
	setup := func(mod func(*Config)) (a, b *Endpoint, h Handle, now Time) {
		t.Helper()
		a, b = mkEP(t, ipA, mod), mkEP(t, ipB, mod)
		b.Listen(80)
		h, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range 10 { // fast exchanges: the RTO at its 1 ms floor
			a.Write(h, []byte("ping"), now)
			ackAll(t, a, b, poll(t, a, now, true), now, now+20*us)
			now += 100 * us
		}
		return a, b, h, now
	}
	rtoOf := func(a *Endpoint, h Handle) time.Duration {
		t.Helper()
		return rttOf(t, a, h).RTO
	}

	a, b, h, now := setup(nil)
	if got := rtoOf(a, h); got != time.Millisecond {
		t.Fatalf("before any stall: RTO %v, want the 1 ms floor", got)
	}
	a.Write(h, []byte("ping"), now)
	f := poll(t, a, now, true)
	// Both hosts stall 2 ms; a notices first.
	now += 2 * ms
	a.NoteStall(2*ms, now)
	if got := rtoOf(a, h); got != 4*time.Millisecond {
		t.Fatalf("after a 2 ms stall: RTO %v, want 4 ms", got)
	}
	a.HandleTimers(now)
	if st := a.Stats(); st.RTOFires != 0 || st.HostStalls != 1 {
		t.Fatalf("after the stall: %d RTO fires, %d host stalls; want 0, 1", st.RTOFires, st.HostStalls)
	}
	ackAll(t, a, b, f, now+100*us, now+120*us) // b is back and answers
	a.HandleTimers(now + 3*ms)
	if st := a.Stats(); st.RTOFires != 0 {
		t.Fatalf("the peer answered after the stall: %d RTO fires", st.RTOFires)
	}
	// Halved every second: 4 ms at once, 2 ms a second later, the floor
	// after three. (A fresh pair: the late ACK above was an RTT sample.)
	a, _, h, now = setup(nil)
	a.NoteStall(2*ms, now)
	if got := rttOfAt(t, a, h, now+Time(time.Second)); got != 2*time.Millisecond {
		t.Fatalf("a second later: RTO %v, want 2 ms", got)
	}
	if got := rttOfAt(t, a, h, now+Time(3*time.Second)); got != time.Millisecond {
		t.Fatalf("three seconds later: RTO %v, want the floor", got)
	}

	// A stall under RTO/4 is not remembered.
	a, _, h, now = setup(nil)
	a.NoteStall(ms/4-us, now)
	if got, st := rtoOf(a, h), a.Stats(); got != time.Millisecond || st.HostStalls != 0 {
		t.Fatalf("after a stall under RTO/4: RTO %v, %d host stalls; want the floor, 0", got, st.HostStalls)
	}

	// FixedRTO keeps its RTO.
	a, _, h, now = setup(func(c *Config) { c.FixedRTO = true })
	a.NoteStall(2*ms, now)
	if got, st := rtoOf(a, h), a.Stats(); got != time.Millisecond || st.HostStalls != 0 {
		t.Fatalf("FixedRTO after a stall: RTO %v, %d host stalls; want 1 ms, 0", got, st.HostStalls)
	}
}

// rttOfAt is h's RTO as the endpoint would compute it at now.
func rttOfAt(t *testing.T, e *Endpoint, h Handle, now Time) time.Duration {
	t.Helper()
	e.now = max(e.now, now)
	return rttOf(t, e, h).RTO
}

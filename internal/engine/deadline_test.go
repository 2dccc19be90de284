package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// stepClock is a settable clock for NoBackground stacks.
type stepClock struct{ t atomic.Int64 }

func (c *stepClock) now() ndp.Time           { return ndp.Time(c.t.Load()) }
func (c *stepClock) set(t ndp.Time)          { c.t.Store(int64(t)) }
func (c *stepClock) add(d time.Duration)     { c.t.Add(int64(d)) }
func newStepClock(start ndp.Time) *stepClock { c := &stepClock{}; c.set(start); return c }

// deadlinePair is two NoBackground stacks on one fake clock: the test
// drives every Poll, so each NextDeadline answer is deterministic.
func deadlinePair(t *testing.T) (a, b *Stack, clk *stepClock) {
	t.Helper()
	clk = newStepClock(ndp.Time(time.Second))
	la, lb := NewMemPipe(MemConfig{}, macA, macB)
	mk := func(l *MemLink, ip [4]byte, seed uint64) *Stack {
		s, err := New(Config{
			Link:         l,
			Endpoint:     ndp.Config{LocalIP: ip, Seed: seed, RTO: time.Millisecond, IW: 30}, // a first window within one receive Batch
			Resolver:     StaticResolver{ipA: macA, ipB: macB},
			LinkRate:     1e9,
			NoBackground: true,
			Clock:        clk.now,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return mk(la, ipA, 1), mk(lb, ipB, 2), clk
}

func TestNextDeadline(t *testing.T) {
	t.Run("idle stack has none", func(t *testing.T) {
		a, _, _ := deadlinePair(t)
		a.Poll()
		if d, ok := a.NextDeadline(); ok {
			t.Fatalf("idle stack: deadline %d", d)
		}
	})
	t.Run("sent data arms the RTO", func(t *testing.T) {
		a, _, clk := deadlinePair(t)
		c, err := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d, ok := a.NextDeadline(); ok {
			t.Fatalf("dialed, nothing sent: deadline %d", d)
		}
		sent := clk.now()
		if _, err := c.Write([]byte("hello"), false, nil); err != nil {
			t.Fatal(err)
		}
		// A fresh stack has no RTT estimate: the first window's RTO is
		// InitialRTO, 4*RTO by default.
		irto := ndp.Time(a.cfg.Endpoint.InitialRTO)
		if irto != ndp.Time(4*time.Millisecond) {
			t.Fatalf("InitialRTO %v, want the default 4*RTO", time.Duration(irto))
		}
		d, ok := a.NextDeadline()
		if !ok || d <= sent || d > sent+irto {
			t.Fatalf("after a send at %d: deadline %d ok=%v, want in (sent, sent+InitialRTO]", sent, d, ok)
		}
		// Overdue: the deadline is not in the past, it is now.
		clk.set(d + ndp.Time(5*time.Millisecond))
		if d2, ok := a.NextDeadline(); !ok || d2 != clk.now() {
			t.Fatalf("overdue timer: deadline %d ok=%v, want now %d", d2, ok, clk.now())
		}
		// Polling fires the RTO (B never polls, nothing is ACKed) and re-arms
		// the timer in the future.
		a.Poll()
		if d3, ok := a.NextDeadline(); !ok || d3 <= clk.now() {
			t.Fatalf("after the RTO fired at %d: deadline %d ok=%v", clk.now(), d3, ok)
		}
	})
	t.Run("paced pulls", func(t *testing.T) {
		a, b, clk := deadlinePair(t)
		if _, err := b.Listen(7, 0); err != nil {
			t.Fatal(err)
		}
		c, err := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// More than the first-RTT window: B pulls the rest, paced at 1 Gb/s.
		if _, err := c.Write(make([]byte, 64<<10), false, nil); err != nil {
			t.Fatal(err)
		}
		b.Poll() // takes in the pushed window, queues one PULL per packet, releases the first batch
		now := clk.now()
		d, ok := b.NextDeadline()
		// One full-size pull slot at 1 Gb/s is 12.3us; the first batch took
		// the first PullBatch slots, so the next release is PullBatch slots
		// on; the RTO (1ms) is far.
		slots := ndp.Time(b.Config().PullBatch)
		if !ok || d <= now || d > now+slots*ndp.Time(13*time.Microsecond) {
			t.Fatalf("pull queue busy at %d: deadline %d ok=%v (%v ahead), want the next pull within %d slots", now, d, ok, time.Duration(d-now), slots)
		}
		clk.add(time.Duration(d - now))
		before := b.Stats().PullsReleased
		b.Poll()
		if after := b.Stats().PullsReleased; after <= before {
			t.Fatalf("at the deadline no PULL was released (%d → %d)", before, after)
		}
	})
	t.Run("closed stack has none", func(t *testing.T) {
		a, _, _ := deadlinePair(t)
		a.Close()
		if _, ok := a.NextDeadline(); ok {
			t.Fatal("closed stack reports a deadline")
		}
	})
}

// TestRTTSampleAtReceiveClock: a poll handles the frames it receives at a
// clock read taken after receiving them, not at its caller's older now (an
// afterCallUnlock poll after the kick runs at the call's now; a spinner may
// be descheduled between its clock read and its poll). The ACK here comes
// back 300 µs after the request left and is polled with the send's now: the
// sample must be the 300 µs, not 0.
func TestRTTSampleAtReceiveClock(t *testing.T) {
	a, b, clk := deadlinePair(t)
	if _, err := b.Listen(7, 0); err != nil {
		t.Fatal(err)
	}
	c, err := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sent := clk.now()
	if _, err := c.Write([]byte("hello"), false, nil); err != nil {
		t.Fatal(err)
	}
	clk.add(30 * time.Microsecond)
	b.Poll() // takes the request in and holds its ACK for an answer
	clk.add(270 * time.Microsecond)
	b.Poll() // no answer within AckHold: the ACK leaves as a frame
	if got := b.Stats().Endpoint.AcksOut; got == 0 {
		t.Fatalf("B sent no ACK frame (AcksOut %d)", got)
	}
	a.mu.Lock()
	a.pollLocked(sent) // the caller's clock read, older than the ACK
	a.unlock()
	st := a.Stats().Endpoint
	if st.RTTSamples != 1 {
		t.Fatalf("RTT samples %d, want 1", st.RTTSamples)
	}
	// 300 µs lies in bucket [256, 512) µs: index 9.
	if st.RTTHist[0] != 0 || st.RTTHist[9] != 1 {
		t.Fatalf("RTT histogram %v: want the one sample in bucket 9 ([256, 512) µs), none below 1 µs", st.RTTHist)
	}
}

package pullpacer

import (
	"math"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

const ms = ndp.Time(1_000_000)

func deadlineQueue(t *testing.T, base int64) *PullQueue {
	return mustQueue(t, QueueConfig{LinkRate: 10e9, PullBytes: 1538, Policy: PolicyDeadline, BaseRate: base})
}

// sizeFor returns the flow size in bytes that needs rate bits/s to finish in d.
func sizeFor(rate float64, d ndp.Time) int64 { return int64(rate * float64(d) / 8e9) }

func checkAlloc(t *testing.T, q *PullQueue, h ndp.Handle, want float64) {
	t.Helper()
	got, _, ok := q.Allocation(h)
	if !ok {
		t.Fatalf("no allocation for %d", h)
	}
	if math.Abs(got-want) > want*1e-9+1 {
		t.Errorf("flow %d: allocation %.6g bit/s, want %.6g", h, got, want)
	}
}

// The cases below are computed by hand from the rules in deadline.go, C = 10 Gb/s.
func TestD3AllocationHandComputed(t *testing.T) {
	t.Run("enough capacity: r plus fair share of spare", func(t *testing.T) {
		q := deadlineQueue(t, 0)
		// A needs 2 Gb/s, B 3 Gb/s; U1, U2 have no hints. D = 5G, N = 4,
		// fs = (10G - 5G)/4 = 1.25G: A = 3.25G, B = 4.25G, U = 1.25G each.
		q.SetFlow(1, Flow{Size: sizeFor(2e9, 1*ms), Deadline: 1 * ms}, 0)
		q.SetFlow(2, Flow{Size: sizeFor(3e9, 2*ms), Deadline: 2 * ms}, 0)
		q.Add(3, 1)
		q.Add(4, 1)
		q.Reallocate(0)
		checkAlloc(t, q, 1, 3.25e9)
		checkAlloc(t, q, 2, 4.25e9)
		checkAlloc(t, q, 3, 1.25e9)
		checkAlloc(t, q, 4, 1.25e9)
	})
	t.Run("oversubscribed: earliest deadline first, rest share what is left", func(t *testing.T) {
		q := deadlineQueue(t, 10e6)
		// A 6G (deadline 1ms), B 5G (2ms), C 3G (3ms), U unhinted; D = 14G > C.
		// Base b = 10M each, reserved: left = 10G - 40M = 9.96G.
		// A: 6G - 10M = 5.99G fits -> A = 6G, left 3.97G.
		// B: 4.99G does not fit -> skipped.
		// C: 2.99G fits -> C = 3G, left 0.98G.
		// rest = {B, U}: each 10M + 0.98G/2 = 0.5G.  Total 6+3+0.5+0.5 = 10G.
		q.SetFlow(1, Flow{Size: sizeFor(6e9, 1*ms), Deadline: 1 * ms}, 0)
		q.SetFlow(2, Flow{Size: sizeFor(5e9, 2*ms), Deadline: 2 * ms}, 0)
		q.SetFlow(3, Flow{Size: sizeFor(3e9, 3*ms), Deadline: 3 * ms}, 0)
		q.Add(4, 1)
		q.Reallocate(0)
		checkAlloc(t, q, 1, 6e9)
		checkAlloc(t, q, 2, 0.5e9)
		checkAlloc(t, q, 3, 3e9)
		checkAlloc(t, q, 4, 0.5e9)
		if q.Stats().Quenched != 0 {
			t.Fatal("nothing should be quenched")
		}
	})
	t.Run("oversubscribed with many flows: base lowered to C/N", func(t *testing.T) {
		q := deadlineQueue(t, 1e9)
		// Base 1G x 20 flows would exceed C; b = 10G/20 = 0.5G, left = 0.
		// A (needs 6G) and B (7G) oversubscribe and cannot be satisfied from
		// left = 0; everyone gets 0.5G.
		q.SetFlow(1, Flow{Size: sizeFor(6e9, 1*ms), Deadline: 1 * ms}, 0)
		q.SetFlow(2, Flow{Size: sizeFor(7e9, 2*ms), Deadline: 2 * ms}, 0)
		for h := 3; h <= 20; h++ {
			q.Add(ndp.Handle(h), 1)
		}
		q.Reallocate(0)
		for h := 1; h <= 20; h++ {
			checkAlloc(t, q, ndp.Handle(h), 0.5e9)
		}
	})
	t.Run("progress lowers the desired rate", func(t *testing.T) {
		q := deadlineQueue(t, 0)
		// 1.25 MB in 2 ms = 5 Gb/s. After 625 kB arrive and 1 ms passes: 625kB in 1ms = 5G.
		// After 1 MB arrived at 1 ms: 250 kB in 1 ms = 2 Gb/s; alone with U: fs = 4G.
		q.SetFlow(1, Flow{Size: 1_250_000, Deadline: 2 * ms}, 0)
		q.Add(2, 1)
		q.Reallocate(0)
		if _, r, _ := q.Allocation(1); math.Abs(r-5e9) > 1 {
			t.Fatalf("desired %.6g, want 5e9", r)
		}
		q.Progress(1, 1_000_000)
		q.Reallocate(1 * ms)
		checkAlloc(t, q, 1, 2e9+4e9)
		checkAlloc(t, q, 2, 4e9)
		// Done: the flow is no longer a deadline flow and shares fairly.
		q.Progress(1, 1_250_000)
		q.Reallocate(1 * ms)
		checkAlloc(t, q, 1, 5e9)
		checkAlloc(t, q, 2, 5e9)
	})
}

func TestD3Quench(t *testing.T) {
	t.Run("desired rate above the link at SetFlow", func(t *testing.T) {
		q := deadlineQueue(t, 0)
		q.Add(1, 4)
		q.SetFlow(1, Flow{Size: 2_000_000, Deadline: 1 * ms}, 0) // 16 Gb/s > 10 Gb/s
		h, ok := q.PollQuenched()
		if !ok || h != 1 {
			t.Fatalf("PollQuenched = %d,%v; want 1", h, ok)
		}
		if _, ok := q.PollQuenched(); ok {
			t.Fatal("quenched twice")
		}
		if q.Len() != 0 || q.Stats().Dropped != 4 {
			t.Fatalf("quenched flow's pulls not dropped: len %d", q.Len())
		}
		q.Add(1, 1) // a quenched flow gets no more pulls
		if q.Len() != 0 {
			t.Fatal("quenched flow accepted pulls")
		}
		q.Remove(1)
		q.Add(1, 1) // a new connection with the handle is fine
		if q.Len() != 1 {
			t.Fatal("removed handle not reusable")
		}
	})
	t.Run("deadline passes while starved", func(t *testing.T) {
		q := deadlineQueue(t, 1e6)
		// A needs 8G until 1ms, B needs 8G until 2ms: B gets only what is left and
		// falls behind; its desired rate grows past the link and it is quenched well
		// before its deadline, while A completes.
		sizeA := sizeFor(8e9, 1*ms)
		sizeB := sizeFor(8e9, 2*ms)
		q.SetFlow(1, Flow{Size: sizeA, Deadline: 1 * ms}, 0)
		q.SetFlow(2, Flow{Size: sizeB, Deadline: 2 * ms}, 0)
		pulls := int(sizeB/1500) + 100
		q.Add(1, int(sizeA/1500)+1)
		q.Add(2, pulls)
		got := map[ndp.Handle]int64{}
		var quenchedAt ndp.Time = -1
		for now := ndp.Time(0); now < 3*ms; now += 100 {
			for {
				h, ok := q.Next(now)
				if !ok {
					break
				}
				got[h] += 1500
				q.Progress(h, got[h])
			}
			if h, ok := q.PollQuenched(); ok {
				if h != 2 {
					t.Fatalf("quenched %d, want 2", h)
				}
				quenchedAt = now
			}
		}
		if got[1] < sizeA {
			t.Fatalf("A received %d of %d bytes: missed its deadline", got[1], sizeA)
		}
		if quenchedAt < 0 || quenchedAt >= 2*ms {
			t.Fatalf("B quenched at %d, want before its 2ms deadline", quenchedAt)
		}
	})
	t.Run("deadline already passed", func(t *testing.T) {
		q := deadlineQueue(t, 0)
		q.SetFlow(3, Flow{Size: 1000, Deadline: 5 * ms}, 6*ms)
		if h, ok := q.PollQuenched(); !ok || h != 3 {
			t.Fatal("expired flow not quenched")
		}
	})
	t.Run("fair policy never quenches", func(t *testing.T) {
		q := mustQueue(t, tenGig)
		q.SetFlow(3, Flow{Size: 1e9, Deadline: 1}, 5*ms)
		q.Add(3, 1)
		if _, ok := q.Next(5 * ms); !ok {
			t.Fatal("not released")
		}
		if _, ok := q.PollQuenched(); ok {
			t.Fatal("fair policy quenched")
		}
	})
}

// TestD3SharesMatchAllocation checks the WFQ schedule: backlogged flows receive pulls
// in proportion to their allocations (the hand-computed 3.25/4.25/1.25/1.25 case).
func TestD3SharesMatchAllocation(t *testing.T) {
	q := deadlineQueue(t, 0)
	const horizon = 100 * ms // long deadlines so the rates barely move
	q.SetFlow(1, Flow{Size: sizeFor(2e9, horizon), Deadline: horizon}, 0)
	q.SetFlow(2, Flow{Size: sizeFor(3e9, horizon), Deadline: horizon}, 0)
	for h := ndp.Handle(1); h <= 4; h++ {
		q.Add(h, 1_000_000)
	}
	// Each pull brings 1538 bytes, reported as progress, so a deadline flow that gets
	// its allocation keeps a nearly steady desired rate over this short window (5 ms
	// of a 100 ms horizon; over longer windows it falls because r + fs > r).
	const slots = 4000
	got := map[ndp.Handle]float64{}
	now := ndp.Time(0)
	for n := 0; n < slots; {
		h, ok := q.Next(now)
		if !ok {
			at, _ := q.NextAt()
			now = max(now, at)
			continue
		}
		n++
		got[h]++
		q.Progress(h, int64(got[h])*1538)
	}
	want := map[ndp.Handle]float64{1: 0.325, 2: 0.425, 3: 0.125, 4: 0.125}
	for h, w := range want {
		if share := got[h] / slots; math.Abs(share-w) > 0.01 {
			t.Errorf("flow %d got %.4f of pulls, want %.3f", h, share, w)
		}
	}
}

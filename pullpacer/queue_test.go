package pullpacer

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// 1538 wire bytes at 10 Gb/s: 1230.4 ns per pull.
var tenGig = QueueConfig{LinkRate: 10e9, PullBytes: 1538}

func mustQueue(t testing.TB, cfg QueueConfig) *PullQueue {
	t.Helper()
	q, err := NewPullQueue(cfg)
	if err != nil {
		t.Fatalf("NewPullQueue(%+v): %v", cfg, err)
	}
	return q
}

func TestQueueConfigValidation(t *testing.T) {
	tests := []struct {
		name  string
		cfg   QueueConfig
		field string // "" = valid
	}{
		{"defaults", tenGig, ""},
		{"no rate", QueueConfig{PullBytes: 1538}, "LinkRate"},
		{"no pull bytes", QueueConfig{LinkRate: 1e9}, "PullBytes"},
		{"gamma > 1", QueueConfig{LinkRate: 1e9, PullBytes: 1538, Gamma: 1.1}, "Gamma"},
		{"gamma < 0", QueueConfig{LinkRate: 1e9, PullBytes: 1538, Gamma: -0.5}, "Gamma"},
		{"gamma NaN", QueueConfig{LinkRate: 1e9, PullBytes: 1538, Gamma: math.NaN()}, "Gamma"},
		{"policy", QueueConfig{LinkRate: 1e9, PullBytes: 1538, Policy: 9}, "Policy"},
		{"burst", QueueConfig{LinkRate: 1e9, PullBytes: 1538, MaxBurst: -1}, "MaxBurst"},
		{"base rate", QueueConfig{LinkRate: 1e9, PullBytes: 1538, BaseRate: -1}, "BaseRate"},
		{"too fast", QueueConfig{LinkRate: 1e15, PullBytes: 64}, "LinkRate"},
		{"too slow", QueueConfig{LinkRate: 1, PullBytes: 9000}, "LinkRate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPullQueue(tt.cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != tt.field {
				t.Fatalf("err = %v, want ConfigError on %s", err, tt.field)
			}
		})
	}
}

func TestInterval(t *testing.T) {
	tests := []struct {
		cfg    QueueConfig
		ns, ps int64
	}{
		{tenGig, 1230, 400},
		{QueueConfig{LinkRate: 10e9, PullBytes: 1538, Gamma: 0.95}, 1295, 158}, // 1295.1578...
		{QueueConfig{LinkRate: 1e9, PullBytes: 1500}, 12000, 0},
		{QueueConfig{LinkRate: 100e9, PullBytes: 9038}, 723, 40},
	}
	for _, tt := range tests {
		iv := tt.cfg.withDefaults().interval()
		if iv.ns != tt.ns || iv.ps != tt.ps {
			t.Errorf("%+v: interval %d.%03dns, want %d.%03dns", tt.cfg, iv.ns, iv.ps, tt.ns, tt.ps)
		}
	}
}

// drain releases everything with a perfectly punctual caller and returns the handles
// and release times.
func drain(q *PullQueue, now ndp.Time, limit int) ([]ndp.Handle, []ndp.Time) {
	var hs []ndp.Handle
	var ts []ndp.Time
	for len(hs) < limit {
		h, ok := q.Next(now)
		if ok {
			hs = append(hs, h)
			ts = append(ts, now)
			continue
		}
		at, ok := q.NextAt()
		if !ok {
			break
		}
		now = max(at, now)
	}
	return hs, ts
}

func TestPacingSpacingNoDrift(t *testing.T) {
	q := mustQueue(t, tenGig)
	const n = 1_000_000
	q.Add(1, n)
	start := ndp.Time(1_000_000)
	_, ts := drain(q, start, n)
	if len(ts) != n {
		t.Fatalf("released %d, want %d", len(ts), n)
	}
	for k := 1; k < len(ts); k++ {
		if gap := ts[k] - ts[k-1]; gap != 1230 && gap != 1231 {
			t.Fatalf("gap %d = %dns, want 1230 or 1231", k, gap)
		}
	}
	// 999,999 intervals of 1230.4ns = 1230398769.6ns: no drift beyond rounding.
	if got, want := ts[n-1]-ts[0], ndp.Time(1230398769); got < want || got > want+1 {
		t.Fatalf("total span %d, want %d", got, want)
	}
}

func TestGammaHeadroom(t *testing.T) {
	q := mustQueue(t, QueueConfig{LinkRate: 10e9, PullBytes: 1538, Gamma: 0.95})
	q.Add(1, 10001)
	_, ts := drain(q, 0, 10001)
	span := float64(ts[len(ts)-1] - ts[0])
	rate := 10000 * 1538 * 8 / span * 1e9 // bits/s elicited
	if math.Abs(rate-9.5e9) > 1e6 {
		t.Fatalf("pull rate elicits %.4g bit/s, want 9.5e9", rate)
	}
}

func TestCatchUpWithoutBurst(t *testing.T) {
	const iv = 1230
	tests := []struct {
		name     string
		maxBurst int
		stall    ndp.Time
	}{
		{"burst2 stall 100 intervals", 2, 100 * iv},
		{"burst2 stall 900us", 2, 900_000},
		{"burst1 stall 10us", 1, 10_000},
		{"burst3 stall 50us", 3, 50_000},
		{"burst2 stall 1.5 intervals", 2, iv + iv/2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := mustQueue(t, QueueConfig{LinkRate: 10e9, PullBytes: 1538, MaxBurst: tt.maxBurst})
			q.Add(7, 100000)
			now := ndp.Time(0)
			if _, ok := q.Next(now); !ok {
				t.Fatal("first pull not released")
			}
			// The caller stalls, then comes back and polls every 10ns for 200 intervals.
			now += tt.stall
			var times []ndp.Time
			for end := now + 200*iv; now < end; now += 10 {
				for {
					if _, ok := q.Next(now); !ok {
						break
					}
					times = append(times, now)
				}
			}
			// Burst = releases less than half an interval apart.
			burst, maxRun := 1, 1
			for k := 1; k < len(times); k++ {
				if times[k]-times[k-1] < iv/2 {
					burst++
				} else {
					burst = 1
				}
				maxRun = max(maxRun, burst)
			}
			if maxRun > tt.maxBurst {
				t.Fatalf("max burst %d > MaxBurst %d", maxRun, tt.maxBurst)
			}
			if tt.stall > ndp.Time(tt.maxBurst)*iv && maxRun != tt.maxBurst {
				t.Fatalf("max burst %d, want catch-up of exactly %d", maxRun, tt.maxBurst)
			}
			// After catching up, releases are back on the interval.
			for k := len(times) - 50; k < len(times); k++ {
				if gap := times[k] - times[k-1]; gap < iv-10 || gap > iv+20 {
					t.Fatalf("gap %d after catch-up = %d, want ~%d", k, gap, iv)
				}
			}
			if tt.stall > 10*iv && q.Stats().LateSlots == 0 {
				t.Fatal("lost slots not counted")
			}
		})
	}
}

func TestIdleThenAddReleasesAtOnceWithoutBurst(t *testing.T) {
	q := mustQueue(t, tenGig)
	q.Add(1, 1)
	if _, ok := q.Next(0); !ok {
		t.Fatal("not released")
	}
	if _, ok := q.Next(0); ok {
		t.Fatal("released from an empty queue")
	}
	// Idle for a long time; then 3 pulls arrive.
	now := ndp.Time(5_000_000)
	q.Add(1, 3)
	if at, ok := q.NextAt(); !ok || at > now {
		t.Fatalf("NextAt = %d,%v; want due now", at, ok)
	}
	if _, ok := q.Next(now); !ok {
		t.Fatal("first pull after idle not released at once")
	}
	if _, ok := q.Next(now); ok {
		t.Fatal("idle time let a second pull go back to back")
	}
	if _, ok := q.Next(now + 1231); !ok {
		t.Fatal("second pull not released one interval later")
	}
}

// jain returns Jain's fairness index of xs.
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	return s * s / (float64(len(xs)) * s2)
}

func TestFairnessEqualFlows(t *testing.T) {
	for _, policy := range []Policy{PolicyFair, PolicyPriority, PolicyDeadline} {
		for _, n := range []int{2, 10, 100, 1000} {
			t.Run(policy.String(), func(t *testing.T) {
				cfg := tenGig
				cfg.Policy = policy
				q := mustQueue(t, cfg)
				// Closed loop, like NDP: each flow starts with a window of 8 pulls
				// and every released pull brings one data packet, hence one new pull,
				// an RTT (here 20 intervals) later.
				const rtt = 20 * 1230
				type arrival struct {
					at ndp.Time
					h  ndp.Handle
				}
				var inflight []arrival
				for h := 1; h <= n; h++ {
					q.Add(ndp.Handle(h), 8)
				}
				counts := make([]float64, n)
				now := ndp.Time(0)
				slots := 200 * n
				for released := 0; released < slots; {
					for len(inflight) > 0 && inflight[0].at <= now {
						q.Add(inflight[0].h, 1)
						inflight = inflight[1:]
					}
					if h, ok := q.Next(now); ok {
						counts[h-1]++
						released++
						inflight = append(inflight, arrival{now + rtt, h})
						continue
					}
					now += 10
				}
				if j := jain(counts); j < 0.99 {
					t.Fatalf("n=%d: Jain's index %.4f < 0.99 (counts %v...)", n, j, counts[:min(n, 10)])
				}
			})
		}
	}
}

func TestStrictPriority(t *testing.T) {
	q := mustQueue(t, QueueConfig{LinkRate: 10e9, PullBytes: 1538, Policy: PolicyPriority})
	// Handles 1,2: class 0; 3,4: class 5; 5: class 200. Added in the worst order.
	q.Add(1, 3)
	q.Add(2, 3)
	q.SetFlow(3, Flow{Priority: 5}, 0)
	q.SetFlow(4, Flow{Priority: 5}, 0)
	q.Add(3, 2)
	q.Add(4, 2)
	q.SetFlow(5, Flow{Priority: 200}, 0)
	q.Add(5, 2)
	hs, _ := drain(q, 0, 100)
	want := []ndp.Handle{5, 5, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2}
	if len(hs) != len(want) {
		t.Fatalf("released %v, want %v", hs, want)
	}
	for k := range want {
		if hs[k] != want[k] {
			t.Fatalf("released %v, want %v", hs, want)
		}
	}

	// A high-priority pull arriving mid-stream goes next, ahead of queued normal ones.
	q.Add(1, 5)
	now := ndp.Time(1e9)
	if h, _ := q.Next(now); h != 1 {
		t.Fatalf("got %d, want 1", h)
	}
	q.Add(5, 1)
	if h, _ := q.Next(now + 2000); h != 5 {
		t.Fatalf("priority pull not served next: got %d", h)
	}

	// Under PolicyFair the same hints are ignored: plain round robin.
	f := mustQueue(t, tenGig)
	f.SetFlow(9, Flow{Priority: 7}, 0)
	f.Add(8, 2)
	f.Add(9, 2)
	hs, _ = drain(f, 0, 10)
	if len(hs) != 4 || hs[0] != 8 || hs[1] != 9 || hs[2] != 8 || hs[3] != 9 {
		t.Fatalf("fair policy honoured priority: %v", hs)
	}
}

// TestSenderLimited reproduces the receiver E of NDP Figure 21: flow A's sender can
// only deliver a quarter of E's link, flow F can send at any rate. Fair queuing must
// give A a pull as soon as A's data arrives (no backlog builds up for A), give F every
// other slot, and leave no slot unused.
func TestSenderLimited(t *testing.T) {
	for _, policy := range []Policy{PolicyFair, PolicyDeadline} {
		t.Run(policy.String(), func(t *testing.T) {
			cfg := tenGig
			cfg.Policy = policy
			q := mustQueue(t, cfg)
			const iv = 1230
			const rtt = 20 * iv
			const A, F = ndp.Handle(1), ndp.Handle(2)
			type arrival struct {
				at ndp.Time
				h  ndp.Handle
			}
			var inflight []arrival
			q.Add(F, 20)
			nextA := ndp.Time(0) // A's data arrives on its own, every 4 intervals
			got := map[ndp.Handle]int{}
			maxA := int64(0)
			now := ndp.Time(0)
			const slots = 40000
			idle := 0
			released := 0
			for ; released < slots; now += 10 {
				for now >= nextA {
					q.Add(A, 1)
					nextA += 4 * iv
				}
				for len(inflight) > 0 && inflight[0].at <= now {
					q.Add(inflight[0].h, 1)
					inflight = inflight[1:]
				}
				maxA = max(maxA, q.Pending(A))
				if at, ok := q.NextAt(); !ok || at > now {
					continue
				}
				h, ok := q.Next(now)
				if !ok {
					idle++
					continue
				}
				released++
				got[h]++
				if h == F { // F's data comes back an RTT later and earns the next pull
					inflight = append(inflight, arrival{now + rtt, F})
				}
			}
			shareA := float64(got[A]) / slots
			if math.Abs(shareA-0.25) > 0.01 {
				t.Fatalf("A got %.3f of the pulls, want 0.25 (all it can use)", shareA)
			}
			if maxA > 2 {
				t.Fatalf("A's pulls queued up to %d: its pulls are not sent as soon as data arrives", maxA)
			}
			// No wasted slots: releases happened back to back at the interval.
			span := float64(now) / iv
			if float64(released)/span < 0.99 {
				t.Fatalf("link used %.3f of slots", float64(released)/span)
			}
		})
	}
}

func TestDropRemoveAndRejects(t *testing.T) {
	q := mustQueue(t, QueueConfig{LinkRate: 10e9, PullBytes: 1538, MaxConns: 2})
	q.Add(1, 5)
	q.Add(2, 5)
	q.Add(3, 5) // table full
	q.Add(0, 1) // invalid handle
	q.Add(1, 0) // nothing owed
	q.Add(1, -3)
	if s := q.Stats(); s.Rejected != 4 || s.Added != 10 || s.Pending != 10 || s.Conns != 2 {
		t.Fatalf("stats %+v", s)
	}
	q.Drop(1)
	if q.Pending(1) != 0 || q.Len() != 5 {
		t.Fatalf("drop: pending %d, len %d", q.Pending(1), q.Len())
	}
	hs, _ := drain(q, 0, 100)
	for _, h := range hs {
		if h != 2 {
			t.Fatalf("released dropped handle %d", h)
		}
	}
	q.Add(1, 1) // still registered, accepts new pulls after LAST
	q.Remove(2)
	q.Add(3, 1) // a slot is free again
	if s := q.Stats(); s.Conns != 2 || s.Pending != 2 || s.Dropped != 5 {
		t.Fatalf("stats %+v", s)
	}
	q.Remove(99) // unknown: no effect
	q.Drop(99)
	q.Progress(99, 5)
	hs, _ = drain(q, 1e9, 10)
	if len(hs) != 2 {
		t.Fatalf("released %v", hs)
	}
}

func TestSteadyStateZeroAlloc(t *testing.T) {
	for _, policy := range []Policy{PolicyFair, PolicyPriority, PolicyDeadline} {
		cfg := tenGig
		cfg.Policy = policy
		cfg.ExpectedConns = 20000
		q := mustQueue(t, cfg)
		const conns = 10000
		for h := 1; h <= conns; h++ {
			if policy != PolicyFair {
				q.SetFlow(ndp.Handle(h), Flow{Priority: uint8(h % 3), Size: int64(h%2) * 1e6, Deadline: 1e9}, 0)
			}
			q.Add(ndp.Handle(h), 2)
		}
		now := ndp.Time(0)
		h := ndp.Handle(1)
		allocs := testing.AllocsPerRun(10000, func() {
			q.Add(h, 1)
			h = h%conns + 1
			now += 1231
			if _, ok := q.Next(now); !ok {
				t.Fatal("nothing released")
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per Add+Next", policy, allocs)
		}
	}
}

func TestIntervalAccessor(t *testing.T) {
	if d := tenGig.Interval(); d != 1230*time.Nanosecond {
		t.Fatalf("Interval() = %v", d)
	}
}

package pullpacer

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// waitFor polls cond until it holds or the (generous) deadline passes. Used only for
// liveness (something eventually happens), never to assert timing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func checkNoLeak(t *testing.T, base int) {
	t.Helper()
	waitFor(t, "pacer goroutine to exit", func() bool { return runtime.NumGoroutine() <= base })
}

func newTestPacer(t *testing.T, cfg PacerConfig) *Pacer {
	t.Helper()
	if cfg.Queue.LinkRate == 0 {
		cfg.Queue = tenGig
	}
	p, err := NewPacer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// collect polls releases until n pulls arrived.
func collect(t *testing.T, p *Pacer, n int) []Release {
	t.Helper()
	var got []Release
	buf := make([]Release, 64)
	waitFor(t, "releases", func() bool {
		for {
			k := p.Poll(buf)
			if k == 0 {
				break
			}
			got = append(got, buf[:k]...)
		}
		return len(got) >= n
	})
	return got
}

func TestPacerReleasesPacedAndFair(t *testing.T) {
	for _, mode := range []ParkMode{ParkFutex, ParkChannel} {
		t.Run([]string{"futex", "channel"}[mode], func(t *testing.T) {
			base := runtime.NumGoroutine()
			p := newTestPacer(t, PacerConfig{Park: mode, RequestRing: 16, ReleaseRing: 16})
			reqs := make([]Request, 0, 10)
			for h := 1; h <= 10; h++ {
				reqs = append(reqs, Request{Op: OpAdd, Handle: ndp.Handle(h), N: 100})
			}
			if n, err := p.Enqueue(reqs); n != 10 || err != nil {
				t.Fatalf("Enqueue = %d, %v", n, err)
			}
			got := collect(t, p, 1000)
			if len(got) != 1000 {
				t.Fatalf("got %d releases, want 1000", len(got))
			}
			per := map[ndp.Handle]int{}
			iv := ndp.Time(p.Interval())
			run := 1
			for k, r := range got {
				if r.Kind != ReleasePull {
					t.Fatalf("release %d kind %d", k, r.Kind)
				}
				per[r.Handle]++
				if k == 0 {
					continue
				}
				gap := r.At - got[k-1].At
				if gap < 0 {
					t.Fatalf("release times go backwards at %d", k)
				}
				// Whatever the scheduler did to the thread, the queue never lets
				// more than MaxBurst out back to back.
				if gap < iv/2 {
					if run++; run > 2 {
						t.Fatalf("%d releases back to back at %d", run, k)
					}
				} else {
					run = 1
				}
			}
			for h := 1; h <= 10; h++ {
				if per[ndp.Handle(h)] != 100 {
					t.Fatalf("handle %d got %d pulls", h, per[ndp.Handle(h)])
				}
			}
			// Empty queue: the thread parks, and a new request wakes it.
			waitFor(t, "park", p.Parked)
			if _, err := p.Enqueue([]Request{{Op: OpAdd, Handle: 3, N: 1}}); err != nil {
				t.Fatal(err)
			}
			if r := collect(t, p, 1); r[0].Handle != 3 {
				t.Fatalf("after wake got %+v", r[0])
			}
			waitFor(t, "stats", func() bool { return p.Stats().Queue.Released == 1001 })
			s := p.Stats()
			if s.Parks == 0 || s.Wakes == 0 || s.Requests != 11 {
				t.Fatalf("stats %+v", s)
			}
			if cpu, err := p.ThreadCPUTime(); runtime.GOOS == "linux" && (err != nil || cpu <= 0) {
				t.Fatalf("ThreadCPUTime = %v, %v", cpu, err)
			}
			p.Close()
			p.Close()
			if _, err := p.Enqueue(reqs); !errors.Is(err, ErrClosed) {
				t.Fatalf("Enqueue after Close: %v", err)
			}
			checkNoLeak(t, base)
		})
	}
}

func TestPacerRequestRingBackpressure(t *testing.T) {
	p := newTestPacer(t, PacerConfig{RequestRing: 4, Queue: QueueConfig{LinkRate: 1e6, PullBytes: 1500}})
	reqs := make([]Request, 1000)
	for k := range reqs {
		reqs[k] = Request{Op: OpAdd, Handle: 1, N: 1}
	}
	total := 0
	waitFor(t, "all requests accepted", func() bool {
		n, err := p.Enqueue(reqs[total:])
		if err != nil {
			t.Fatal(err)
		}
		total += n
		return total == len(reqs)
	})
	waitFor(t, "requests applied", func() bool { return p.Stats().Requests == 1000 })
	if p.Stats().RequestsFull == 0 {
		t.Fatal("a 4-slot ring took 1000 requests without refusing any")
	}
}

func TestPacerQuenchAndOrdering(t *testing.T) {
	p := newTestPacer(t, PacerConfig{Queue: QueueConfig{LinkRate: 10e9, PullBytes: 1538, Policy: PolicyDeadline}})
	now := p.Now()
	reqs := []Request{
		{Op: OpAdd, Handle: 5, N: 1000},
		{Op: OpDrop, Handle: 5}, // LAST right behind: nothing must be released for 5
		{Op: OpAdd, Handle: 6, N: 3},
		{Op: OpSetFlow, Handle: 7, Size: 1 << 30, Deadline: now + ndp.Time(time.Millisecond)}, // 8.6 Tb/s
		{Op: 99, Handle: 8},
	}
	if n, _ := p.Enqueue(reqs); n != len(reqs) {
		t.Fatal("not accepted")
	}
	got := collect(t, p, 4)
	quenched := 0
	for _, r := range got {
		switch {
		case r.Kind == ReleaseQuench && r.Handle == 7:
			quenched++
		case r.Kind == ReleasePull && r.Handle == 6:
		default:
			t.Fatalf("unexpected release %+v", r)
		}
	}
	if quenched != 1 {
		t.Fatalf("quench notices: %d", quenched)
	}
	waitFor(t, "bad request counted", func() bool { return p.Stats().BadRequests == 1 })
}

func TestPacerCloseWhileSleeping(t *testing.T) {
	base := runtime.NumGoroutine()
	// 1 Mb/s: 12 ms between pulls, so the thread sleeps (timed) between releases.
	p, err := NewPacer(PacerConfig{Queue: QueueConfig{LinkRate: 1e6, PullBytes: 1500}})
	if err != nil {
		t.Fatal(err)
	}
	p.Enqueue([]Request{{Op: OpAdd, Handle: 1, N: 100}})
	waitFor(t, "first pull", func() bool { return len(collect(t, p, 1)) == 1 })
	waitFor(t, "timed sleep", func() bool { return p.Stats().TimedSleeps > 0 })
	p.Close()
	checkNoLeak(t, base)
}

func TestPacerRefundRequest(t *testing.T) {
	// 1 Mb/s, 1500-byte pulls: 12 ms apart. A refund of 1400 bytes (11.2 ms) makes the
	// second pull due at once instead of 12 ms later; Refund is the queue's, this only
	// checks that the request reaches it.
	p := newTestPacer(t, PacerConfig{Queue: QueueConfig{LinkRate: 1e6, PullBytes: 1500}})
	p.Enqueue([]Request{{Op: OpAdd, Handle: 1, N: 3}})
	first := collect(t, p, 1)
	p.Enqueue([]Request{{Op: OpRefund, N: 1400}, {Op: OpRefund, N: -1}})
	second := collect(t, p, 1)
	if gap := second[0].At - first[0].At; gap >= ndp.Time(12*time.Millisecond) {
		t.Fatalf("second pull %v after the first: refund not applied", time.Duration(gap))
	}
	waitFor(t, "stats", func() bool {
		s := p.Stats().Queue
		return s.RefundedBytes == 1400 && s.Rejected == 1
	})
}

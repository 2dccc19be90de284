package engine

import (
	"context"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// The adaptive spin window doubles while sleeps are cut short by traffic
// within its reach, up to MaxSpin, and halves back to Spin once sleeps run
// long (or time out).
func TestAdaptiveSpinWindow(t *testing.T) {
	a, _, _, _ := memPair(t, PollAdaptive, func(c *Config) {
		c.Spin = 50 * time.Microsecond
		c.MaxSpin = time.Millisecond
	})
	us := ndp.Time(time.Microsecond)
	limit := 100 * ndp.Time(time.Millisecond)
	want := func(step string, d time.Duration) {
		t.Helper()
		if got := time.Duration(a.spin.Load()); got != d {
			t.Fatalf("%s: spin window %v, want %v", step, got, d)
		}
	}
	want("start", 50*time.Microsecond)
	a.adaptSpin(20*us, limit)
	want("short sleep", 100*time.Microsecond)
	a.adaptSpin(300*us, limit) // longer than the window, not idle: keep
	want("middling sleep", 100*time.Microsecond)
	for i := 0; i < 10; i++ {
		a.adaptSpin(10*us, limit)
	}
	want("many short sleeps", time.Millisecond)
	a.adaptSpin(9*ndp.Time(time.Millisecond), limit)
	want("long sleep", 500*time.Microsecond)
	a.adaptSpin(limit, limit)
	want("timed out", 250*time.Microsecond)
	for i := 0; i < 10; i++ {
		a.adaptSpin(limit, limit)
	}
	want("idle", 50*time.Microsecond)
}

// PULLs released by a busy waiter's poll leave at once, even when its
// ACKs wait for the caller's next call: a reader that processes what it
// read before reading again must not hold its senders back meanwhile.
func TestBusyReaderSendsPullsAtOnce(t *testing.T) {
	la, lb := NewMemPipe(MemConfig{}, macA, macB)
	mk := func(l Link, ip [4]byte, seed uint64, mode PollMode, noBG bool) *Stack {
		s, err := New(Config{
			Link: l, Endpoint: ndp.Config{LocalIP: ip, Seed: seed},
			Resolver: StaticResolver{ipA: macA, ipB: macB}, Mode: mode, NoBackground: noBG,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	snd := mk(la, ipA, 1, PollAdaptive, false)
	rcv := mk(lb, ipB, 2, PollBusy, true) // nobody polls it between the reader's calls
	l, err := rcv.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := snd.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, 200<<10), false, nil); err != nil { // more than the first window
		t.Fatal(err)
	}
	rc, err := l.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Read(make([]byte, 4096), nil); err != nil {
		t.Fatal(err)
	}
	// The reader now "processes" for a while without calling the stack.
	deadline := time.Now().Add(2 * time.Second)
	for snd.Stats().Endpoint.PullsIn == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no PULL reached the sender while the reader was away: the pulls released with the data were held back")
		}
		time.Sleep(time.Millisecond)
	}
}

// A lone adaptive spinner yields the processor once per yieldEvery of
// spinning, not on every poll (for a goroutine locked to its thread each
// yield is a thread handoff).
func TestAdaptiveSpinnerYieldsSparingly(t *testing.T) {
	var now ndp.Time = 1
	la, _ := NewMemPipe(MemConfig{}, macA, macB)
	s, err := New(Config{
		Link: la, Endpoint: ndp.Config{LocalIP: ipA, Seed: 1}, Mode: PollAdaptive,
		Spin: 10 * time.Duration(yieldEvery), NoBackground: true, Clock: func() ndp.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var w waitState
	polls := int(5 * yieldEvery / ndp.Time(100*time.Nanosecond))
	for i := 0; i < polls; i++ { // polls 100 ns apart: 5 x yieldEvery of spinning
		if err := s.await(&w, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		now += ndp.Time(100 * time.Nanosecond)
	}
	if w.yields < 4 || w.yields > 5 {
		t.Fatalf("%d yields in %v of spinning, want one per %v", w.yields, 5*time.Duration(yieldEvery), time.Duration(yieldEvery))
	}
}

// A lone spinner whose waits are each shorter than yieldEvery (a loop of
// short exchanges, its window starting again with every call) yields once
// per yieldEvery across its calls when its stack has other connections,
// whose goroutines may be waiting for its P; with one connection it never
// does (for a goroutine locked to its thread a yield is a thread handoff).
// Before, it never yielded either way: in `ndpperf rpc --conn persistent
// --clients 8` the first client to run held its P for the runtime's forced
// preemption (10 ms) while the other 7, readied onto that P, waited
// (docs/latency.md).
func TestLoneSpinnerYieldsAcrossCalls(t *testing.T) {
	for _, tc := range []struct{ dial, close int }{{1, 0}, {2, 0}, {2, 1}} {
		conns := tc.dial - tc.close
		var now ndp.Time = 1
		s, _, _, _ := memPair(t, PollBusy, func(c *Config) {
			c.NoBackground = true
			c.Clock = func() ndp.Time { return now }
		})
		var cs []*Conn
		for range tc.dial {
			c, err := s.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		for _, c := range cs[:tc.close] {
			c.Close()
		}
		const step = ndp.Time(5 * time.Microsecond)
		yields, calls := 0, 0
		for now < 20*yieldEvery {
			// One call: three polls 5 µs apart (a 15 µs wait), then 5 µs
			// until the next call.
			var w waitState
			for range 3 {
				if err := s.await(&w, nil, nil, nil); err != nil {
					t.Fatal(err)
				}
				now += step
			}
			s.endWait(&w)
			now += step
			yields += int(w.yields)
			calls++
		}
		want := 0
		if conns > 1 {
			want = 20 // one per yieldEvery of the 20
		}
		if yields < want-1 || yields > want {
			t.Errorf("%d connections open: %d yields in %d calls over %v, want %d", conns, yields, calls, time.Duration(20*yieldEvery), want)
		}
	}
}

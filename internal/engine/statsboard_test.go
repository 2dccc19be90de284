package engine

import (
	"context"
	"sync"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// TestStatsSnapshot: while RPCs run, StatsSnapshot readers get counters
// that only grow and never run ahead of what the stack did; on the idle
// stack a snapshot equals Stats.
func TestStatsSnapshot(t *testing.T) {
	a, b, _, _ := memPair(t, PollAdaptive, nil)
	l, err := b.Listen(7, 64)
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, l)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	var snaps []Stats
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			snaps = append(snaps, a.StatsSnapshot())
		}
	}()
	msg := []byte("hello")
	for range 50 {
		c, err := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(msg, true, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := readAll(c); err != nil || string(got) != "hello" {
			t.Fatalf("echo %q, %v", got, err)
		}
		c.Close()
	}
	close(stop)
	wg.Wait()
	if len(snaps) < 2 {
		t.Fatalf("%d snapshots", len(snaps))
	}
	for i := 1; i < len(snaps); i++ {
		p, q := snaps[i-1], snaps[i]
		if q.Polls < p.Polls || q.Endpoint.FramesOut < p.Endpoint.FramesOut || q.Endpoint.ConnsOpened < p.Endpoint.ConnsOpened {
			t.Fatalf("snapshot %d went back: %+v then %+v", i, p.Endpoint, q.Endpoint)
		}
	}
	now := a.Stats()
	last := snaps[len(snaps)-1]
	if last.Endpoint.FramesOut > now.Endpoint.FramesOut || now.Endpoint.ConnsOpened != 50 {
		t.Fatalf("last snapshot %+v ahead of Stats %+v", last.Endpoint, now.Endpoint)
	}
	// Idle, the copy holds every connection and DATA frame.
	s := a.StatsSnapshot()
	now = a.Stats()
	if s.Endpoint.ConnsOpened != now.Endpoint.ConnsOpened || s.Endpoint.DataOut != now.Endpoint.DataOut {
		t.Fatalf("idle snapshot %+v != Stats %+v", s.Endpoint, now.Endpoint)
	}
	// A closed stack still answers (under the lock, at once).
	a.Close()
	if s := a.StatsSnapshot(); s.Endpoint.ConnsOpened != 50 {
		t.Fatalf("closed stack's snapshot: %+v", s.Endpoint)
	}
}

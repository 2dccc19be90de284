package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// How a reader gets the counters without slowing the data path.
//
// Stats takes the stack's lock, which every Poll batch holds: a reader that
// comes often (a metrics scrape, a dashboard) would make a batch wait. A
// StatsSnapshot reader instead raises statsBoard.want (one atomic store)
// and wakes the stack; the next batch, which already holds the lock, sees
// the flag (one atomic load per batch, not per packet), copies the counters
// into a fresh Stats, publishes it through an atomic pointer and signals
// ready. The reader waits at most snapshotWait for that. A stack that runs
// no batch within the bound is idle (nobody polls it: no data path to
// slow down), and the reader then takes the lock and copies the counters
// itself.
type statsBoard struct {
	want   atomic.Bool           // a reader waits for a copy
	snap   atomic.Pointer[Stats] // the latest copy
	ready  chan struct{}         // capacity 1: a copy was published
	readMu sync.Mutex            // one reader at a time; never taken by a batch
}

// snapshotWait bounds how long StatsSnapshot waits for a batch to publish.
const snapshotWait = 20 * time.Millisecond

// publishLocked copies the counters for a StatsSnapshot reader (once per
// request, from the batch that saw it).
func (s *Stack) publishLocked() {
	st := new(Stats)
	*st = s.statsLocked()
	s.board.snap.Store(st)
	s.board.want.Store(false)
	select {
	case s.board.ready <- struct{}{}:
	default:
	}
}

// StatsSnapshot returns the counters as Stats does, without contending for
// the stack's lock while the stack is busy: the next Poll batch copies them
// (see statsBoard). It waits at most 20ms for a batch, then copies them
// under the lock (the stack is idle). Safe from any goroutine; concurrent
// callers take turns.
func (s *Stack) StatsSnapshot() Stats {
	b := &s.board
	b.readMu.Lock()
	defer b.readMu.Unlock()
	select {
	case <-b.ready: // a stale signal from a request that timed out
	default:
	}
	b.want.Store(true)
	signal(s.bgKick)
	if s.sleeping.Load() {
		s.link.Wake()
	}
	t := time.NewTimer(snapshotWait)
	defer t.Stop()
	select {
	case <-b.ready:
		return *b.snap.Load()
	case <-t.C:
	case <-s.done:
	}
	s.mu.Lock()
	s.publishLocked()
	s.mu.Unlock()
	<-b.ready
	return *b.snap.Load()
}

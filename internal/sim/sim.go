package sim

import (
	"container/heap"
	"math/rand/v2"

	"github.com/ndpstack/ndpstack/ndp"
)

// Sim is the event queue and virtual clock. It is single-threaded.
type Sim struct {
	now    ndp.Time
	seq    uint64
	events eventHeap
	rng    *rand.Rand
	steps  uint64
	bufs   [][]byte // free frame buffers
	bufLen int
}

type event struct {
	at  ndp.Time
	seq uint64
	fn  func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// New returns a simulator whose random choices follow seed, with frame buffers of
// bufLen bytes.
func New(seed uint64, bufLen int) *Sim {
	return &Sim{rng: rand.New(rand.NewPCG(seed, seed^0x5851F42D4C957F2D)), bufLen: bufLen}
}

// Now is the virtual time.
func (s *Sim) Now() ndp.Time { return s.now }

// Rand is the simulation's random source.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// At schedules fn at time t (at once, after the current event, if t is in the past).
func (s *Sim) At(t ndp.Time, fn func()) {
	if t < s.now {
		t = s.now
	}
	s.seq++
	heap.Push(&s.events, event{at: t, seq: s.seq, fn: fn})
}

// After schedules fn d nanoseconds from now.
func (s *Sim) After(d ndp.Time, fn func()) { s.At(s.now+d, fn) }

// Run processes events until the queue is empty, done returns true, or the clock passes
// limit. It reports whether done became true.
func (s *Sim) Run(limit ndp.Time, done func() bool) bool {
	for s.events.Len() > 0 {
		if done != nil && done() {
			return true
		}
		if s.events[0].at > limit {
			s.now = limit
			return done != nil && done()
		}
		e := heap.Pop(&s.events).(event)
		s.now = e.at
		s.steps++
		e.fn()
	}
	return done != nil && done()
}

// Steps reports how many events have run.
func (s *Sim) Steps() uint64 { return s.steps }

// getBuf returns a frame buffer of full length.
func (s *Sim) getBuf() []byte {
	if n := len(s.bufs); n > 0 {
		b := s.bufs[n-1]
		s.bufs = s.bufs[:n-1]
		return b[:cap(b)]
	}
	return make([]byte, s.bufLen)
}

// putBuf recycles a frame buffer once nothing refers to it.
func (s *Sim) putBuf(b []byte) {
	if cap(b) == s.bufLen {
		s.bufs = append(s.bufs, b[:0])
	}
}

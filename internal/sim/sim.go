package sim

import (
	"math/rand/v2"

	"github.com/ndpstack/ndpstack/ndp"
)

// Sim is the event queue and virtual clock. It is single-threaded.
//
// Events run in (time, sequence) order: at equal times, in the order they were
// scheduled. The queue is a 4-ary min-heap of 16-byte keys; what an event does lives in
// a slab of bodies the keys index, recycled through a free list, so scheduling the
// simulator's own events (a link finishing a frame, a frame arriving, a host's pull or
// timer) allocates nothing. At and After take a closure for everything else.
type Sim struct {
	now   ndp.Time
	seq   uint64
	heap  []evKey
	body  []evBody
	free  []uint32 // unused body slots
	rng   *rand.Rand
	steps uint64

	bufs   [][]byte // free frame buffers
	bufLen int
	// bufOwn, when non-zero, is the bytes at the start of a frame buffer that belong to
	// it alone: buffers are carved from shared arenas bufOwn bytes apart, each bufLen
	// long, so the rest of a buffer overlaps the buffers after it (lengths-only
	// payloads, Params.CheckBytes off: nothing writes or reads past the headers). The
	// headers of every frame in flight then sit in a few hundred KB instead of one
	// frame-sized buffer each, and each hop's first touch of a frame hits the cache.
	bufOwn int
}

// frameSlot is a shared-arena frame buffer's own bytes: the largest header (Ethernet,
// IPv4, UDP and NDP: ndp.HeaderOverhead) rounded up to whole cache lines.
const frameSlot = (ndp.HeaderOverhead + 63) &^ 63

// arenaSlots is how many frame buffers one shared arena holds.
const arenaSlots = 1024

// evKey orders an event: 16 bytes, so a node's four children share a cache line or
// two. ord is the event's sequence number above slotBits bits of the slot that holds
// its body; sequence numbers are unique, so ordering by (at, ord) is ordering by
// (at, sequence). The packing bounds a run to 2^40 events (about 10^12) and 2^24
// events pending at once.
type evKey struct {
	at  ndp.Time
	ord uint64
}

const slotBits = 24

func (k *evKey) slot() uint32 { return uint32(k.ord & (1<<slotBits - 1)) }

func (a *evKey) before(b *evKey) bool {
	return a.at < b.at || (a.at == b.at && a.ord < b.ord)
}

type evKind uint8

const (
	evFunc     evKind = iota // fn()
	evLinkDone               // link finished serializing frame
	evArrive                 // frame reaches the far end of link
	evPulls                  // host's pull release
	evTimers                 // host's endpoint timers
)

type evBody struct {
	kind  evKind
	link  *Link
	host  *Host
	frame []byte
	fn    func()
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
func (s *Sim) At(t ndp.Time, fn func()) { s.push(t, evBody{kind: evFunc, fn: fn}) }

// After schedules fn d nanoseconds from now.
func (s *Sim) After(d ndp.Time, fn func()) { s.At(s.now+d, fn) }

// push schedules the event b at time t (now, if t is in the past).
func (s *Sim) push(t ndp.Time, b evBody) {
	if t < s.now {
		t = s.now
	}
	s.seq++
	var slot uint32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
		s.body[slot] = b
	} else {
		if len(s.body) == 1<<slotBits {
			// 16 million events pending at once (a gigabyte of bodies): no topology
			// the simulator can hold in memory gets here.
			panic("sim: more than 2^24 events pending")
		}
		slot = uint32(len(s.body))
		s.body = append(s.body, b)
	}
	s.heap = append(s.heap, evKey{at: t, ord: s.seq<<slotBits | uint64(slot)})
	s.up(len(s.heap) - 1)
}

// up restores the heap order from leaf i toward the root.
func (s *Sim) up(i int) {
	h := s.heap
	k := h[i]
	for i > 0 {
		p := (i - 1) / 4
		if !k.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = k
}

// pop removes the earliest event's key.
func (s *Sim) pop() evKey {
	h := s.heap
	top := h[0]
	n := len(h) - 1
	k := h[n]
	s.heap = h[:n]
	h = h[:n]
	if n == 0 {
		return top
	}
	// Floyd's method: move the hole at the root down along the smallest children to a
	// leaf, then sift k up from there. k comes from the bottom and almost always
	// belongs near it, so this saves comparing it with the smallest child at every
	// level on the way down.
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if h[j].before(&h[m]) {
				m = j
			}
		}
		h[i] = h[m]
		i = m
	}
	h[i] = k
	s.up(i)
	return top
}

// Run processes events until the queue is empty, done returns true, or the clock passes
// limit. It reports whether done became true.
func (s *Sim) Run(limit ndp.Time, done func() bool) bool {
	for len(s.heap) > 0 {
		if done != nil && done() {
			return true
		}
		if s.heap[0].at > limit {
			s.now = limit
			return done != nil && done()
		}
		k := s.pop()
		// The slot is reused as it is: the next push overwrites it whole, and what it
		// still refers to meanwhile (a pooled frame, a link, a workload closure) is
		// alive anyway.
		slot := k.slot()
		b := s.body[slot]
		s.free = append(s.free, slot)
		s.now = k.at
		s.steps++
		switch b.kind {
		case evLinkDone:
			b.link.done(b.frame)
		case evArrive:
			b.link.arrive(b.frame)
		case evPulls:
			b.host.releasePulls(k.at)
		case evTimers:
			b.host.fireTimers(k.at)
		default:
			b.fn()
		}
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
	if s.bufOwn == 0 {
		return make([]byte, s.bufLen)
	}
	arena := make([]byte, (arenaSlots-1)*s.bufOwn+s.bufLen)
	for i := arenaSlots - 1; i > 0; i-- {
		o := i * s.bufOwn
		s.bufs = append(s.bufs, arena[o:o:o+s.bufLen])
	}
	return arena[:s.bufLen:s.bufLen]
}

// shareBufs makes frame buffers overlapping views of shared arenas, each owning only its
// first own bytes (see bufOwn). Call it before the first getBuf.
func (s *Sim) shareBufs(own int) { s.bufOwn = own }

// ownBytes is how many bytes at the start of a frame buffer belong to it alone.
func (s *Sim) ownBytes() int {
	if s.bufOwn == 0 {
		return s.bufLen
	}
	return s.bufOwn
}

// putBuf recycles a frame buffer once nothing refers to it.
func (s *Sim) putBuf(b []byte) {
	if cap(b) == s.bufLen {
		s.bufs = append(s.bufs, b[:0])
	}
}

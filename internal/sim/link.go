package sim

import "github.com/ndpstack/ndpstack/ndp"

// EthernetOverhead is the bytes a frame occupies on the wire beyond the frame we build:
// preamble and start delimiter (8), FCS (4) and the inter-frame gap (12).
const EthernetOverhead = 24

// Faults are a link's injected failures, each a probability per frame.
type Faults struct {
	Loss      float64 // the frame vanishes
	Duplicate float64 // the frame arrives twice
	Reorder   float64 // the frame is held back by a random extra delay up to ReorderDelay
	Corrupt   float64 // one random byte of the frame is flipped
	// ReorderDelay bounds the extra delay of reordered frames. Zero means 10 µs.
	ReorderDelay ndp.Time
}

// LinkStats counts a link's traffic.
type LinkStats struct {
	Frames, Bytes                          uint64
	Lost, Duplicated, Reordered, Corrupted uint64
	BusyTime                               ndp.Time // total serialization time
	FirstStart, LastEnd                    ndp.Time // first frame started, last frame ended
}

// node receives frames at the far end of a link. The frame buffer is the node's to keep
// or recycle.
type node interface {
	receive(frame []byte)
}

// Link is one direction of a cable. It pulls frames from its source when idle.
type Link struct {
	sim    *Sim
	Rate   float64  // bits per second
	Delay  ndp.Time // propagation delay
	Faults Faults
	to     node
	source func(now ndp.Time) ([]byte, bool)
	busy   bool
	stats  LinkStats
}

func newLink(s *Sim, rate float64, delay ndp.Time, to node) *Link {
	return &Link{sim: s, Rate: rate, Delay: delay, to: to}
}

// Stats returns the link's counters.
func (l *Link) Stats() LinkStats { return l.stats }

// SerializationTime is how long a frame of n bytes occupies the link.
func (l *Link) SerializationTime(n int) ndp.Time {
	return ndp.Time(float64(n+EthernetOverhead) * 8 / l.Rate * 1e9)
}

// kick starts sending the next frame if the link is idle.
func (l *Link) kick() {
	if l.busy || l.source == nil {
		return
	}
	f, ok := l.source(l.sim.now)
	if !ok {
		return
	}
	l.busy = true
	ser := l.SerializationTime(len(f))
	if l.stats.Frames == 0 {
		l.stats.FirstStart = l.sim.now
	}
	l.stats.Frames++
	l.stats.Bytes += uint64(len(f))
	l.stats.BusyTime += ser
	end := l.sim.now + ser
	l.stats.LastEnd = end
	l.sim.At(end, func() {
		l.busy = false
		l.deliver(f)
		l.kick()
	})
}

// deliver applies the link's faults and hands f to the far end after the delay.
func (l *Link) deliver(f []byte) {
	s := l.sim
	fl := &l.Faults
	if fl.Loss > 0 && s.rng.Float64() < fl.Loss {
		l.stats.Lost++
		s.putBuf(f)
		return
	}
	if fl.Corrupt > 0 && s.rng.Float64() < fl.Corrupt {
		l.stats.Corrupted++
		f[s.rng.IntN(len(f))] ^= byte(1 + s.rng.IntN(255))
	}
	delay := l.Delay
	if fl.Reorder > 0 && s.rng.Float64() < fl.Reorder {
		l.stats.Reordered++
		max := fl.ReorderDelay
		if max == 0 {
			max = 10_000
		}
		delay += ndp.Time(s.rng.Int64N(int64(max)) + 1)
	}
	if fl.Duplicate > 0 && s.rng.Float64() < fl.Duplicate {
		l.stats.Duplicated++
		dup := s.getBuf()[:len(f)]
		copy(dup, f)
		s.After(delay+1, func() { l.to.receive(dup) })
	}
	s.After(delay, func() { l.to.receive(f) })
}

package sim

import (
	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// EthernetOverhead is the bytes a frame occupies on the wire beyond the frame we build:
// preamble and start delimiter (8), FCS (4) and the inter-frame gap (12).
const EthernetOverhead = 24

// Faults are a link's injected failures, each a probability per frame.
type Faults struct {
	Loss      float64 // the frame vanishes
	Duplicate float64 // the frame arrives twice
	Reorder   float64 // the frame is held back by a random extra delay up to ReorderDelay
	Corrupt   float64 // one random byte of the frame is flipped (the hosts must carry bytes: Params.CheckBytes)
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
// or recycle. Links into hosts and switches call them directly (Link.arrive); other
// nodes (tests) go through the interface.
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
	toHost *Host   // to, when it is a host
	toSw   *Switch // to, when it is a switch
	// The frame source: a switch port (srcPort) or a host's endpoint (srcHost) when
	// set, else source.
	srcPort *fabric.Port
	srcHost *Host
	source  func(now ndp.Time) ([]byte, bool)
	busy    bool
	stats   LinkStats
}

func newLink(s *Sim, rate float64, delay ndp.Time, to node) *Link {
	l := &Link{sim: s, Rate: rate, Delay: delay}
	l.setTo(to)
	return l
}

// setTo makes to the link's far end.
func (l *Link) setTo(to node) {
	l.to, l.toHost, l.toSw = to, nil, nil
	switch n := to.(type) {
	case *Host:
		l.toHost = n
	case *Switch:
		l.toSw = n
	}
}

// fed reports whether the link has a frame source.
func (l *Link) fed() bool { return l.srcPort != nil || l.srcHost != nil || l.source != nil }

// next returns the source's next frame.
func (l *Link) next() ([]byte, bool) {
	switch {
	case l.srcPort != nil:
		return l.srcPort.Dequeue(l.sim.now)
	case l.srcHost != nil:
		return l.srcHost.nextFrame(l.sim.now)
	case l.source != nil:
		return l.source(l.sim.now)
	}
	return nil, false
}

// Stats returns the link's counters.
func (l *Link) Stats() LinkStats { return l.stats }

// SerializationTime is how long a frame of n bytes occupies the link.
func (l *Link) SerializationTime(n int) ndp.Time {
	return ndp.Time(float64(n+EthernetOverhead) * 8 / l.Rate * 1e9)
}

// kick starts sending the next frame if the link is idle.
func (l *Link) kick() {
	if l.busy {
		return
	}
	f, ok := l.next()
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
	l.sim.push(end, evBody{kind: evLinkDone, link: l, frame: f})
}

// done ends f's serialization: f leaves for the far end and the next frame starts.
func (l *Link) done(f []byte) {
	l.busy = false
	l.deliver(f)
	l.kick()
}

// arrive hands f to the far end.
func (l *Link) arrive(f []byte) {
	switch {
	case l.toSw != nil:
		l.toSw.forward(f, 0)
	case l.toHost != nil:
		l.toHost.receive(f)
	default:
		l.to.receive(f)
	}
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
		copy(dup[:min(len(f), s.ownBytes())], f)
		s.push(s.now+delay+1, evBody{kind: evArrive, link: l, frame: dup})
	}
	s.push(s.now+delay, evBody{kind: evArrive, link: l, frame: f})
}

package ring

import (
	"fmt"
	"sync/atomic"
)

// AppID names one attached application in a Pool: its partition slot plus a
// generation, so an ID that outlives its application (the slot was
// reclaimed and reused) is rejected as ErrStaleApp rather than aliasing the
// next tenant. The zero AppID is never assigned.
type AppID uint32

func makeAppID(slot int, gen uint16) AppID { return AppID(uint32(gen)<<16 | uint32(slot+1)) }

func (a AppID) slot() int   { return int(a&0xffff) - 1 }
func (a AppID) gen() uint16 { return uint16(a >> 16) }

// Partition is a contiguous range of frame indices [First, First+Count).
type Partition struct {
	First, Count uint32
}

// Contains reports whether frame lies in p.
func (p Partition) Contains(frame uint32) bool {
	return frame >= p.First && uint64(frame) < uint64(p.First)+uint64(p.Count)
}

// PoolConfig describes the buffer area the pool accounts for. Frames and
// FrameSize are required; the others have defaults.
type PoolConfig struct {
	// Frames is the number of frames in the buffer area (the UMEM).
	Frames uint32
	// FrameSize is the size of one frame in bytes, in [MinFrameSize, MaxFrameSize].
	FrameSize uint32
	// DaemonFrames is the size of the daemon's partition, frames [0,
	// DaemonFrames): RX frames (the AF_XDP fill ring) and the daemon's own
	// control packets. Default Frames/2.
	DaemonFrames uint32
	// AppFrames is the size of each application's TX partition. The frames
	// after the daemon's partition are cut into (Frames-DaemonFrames)/AppFrames
	// partitions, one per attached application. Default 256.
	AppFrames uint32
}

func (c PoolConfig) populate() PoolConfig {
	if c.DaemonFrames == 0 {
		c.DaemonFrames = c.Frames / 2
	}
	if c.AppFrames == 0 {
		c.AppFrames = 256
	}
	return c
}

func (c PoolConfig) validate() error {
	switch {
	case c.Frames == 0 || c.Frames == NoFrame:
		return configErr("Frames", "%d is not a usable frame count", c.Frames)
	case c.FrameSize < MinFrameSize || c.FrameSize > MaxFrameSize:
		return configErr("FrameSize", "%d outside [%d, %d]", c.FrameSize, MinFrameSize, MaxFrameSize)
	case c.DaemonFrames >= c.Frames:
		return configErr("DaemonFrames", "%d leaves no frames for applications out of %d", c.DaemonFrames, c.Frames)
	case c.AppFrames > c.Frames-c.DaemonFrames:
		return configErr("AppFrames", "%d exceeds the %d frames after the daemon partition", c.AppFrames, c.Frames-c.DaemonFrames)
	case (c.Frames-c.DaemonFrames)/c.AppFrames > 0xfffe:
		return configErr("AppFrames", "%d yields more than %d partitions", c.AppFrames, 0xfffe)
	}
	return nil
}

// Frame states in Pool.state (low 8 bits; bits 8..23 hold the app slot of a lent frame).
const (
	stFree     = 1 // daemon partition, on the free stack
	stDaemon   = 2 // daemon partition, held by the daemon (fill ring, RX, own TX)
	stLent     = 3 // daemon partition, lent to the app in bits 8..23 (sits on its RX ring or in its hands)
	stIdle     = 4 // app partition whose slot has no application
	stApp      = 5 // app partition, owned by its application
	stInFlight = 6 // app partition, submitted on TX and held by the daemon
)

type slotState uint8

const (
	slotIdle     slotState = iota // no application
	slotAttached                  // application live
	slotDraining                  // application gone; waiting for in-flight frames
)

type appSlot struct {
	gen      uint16
	state    slotState
	part     Partition
	lent     uint32 // daemon frames lent to this app
	inFlight uint32 // partition frames held by the daemon
}

// PoolCounters counts rejected input. Safe to read from any goroutine.
type PoolCounters struct {
	RejectedRange    atomic.Uint64 // frame outside the buffer area
	RejectedNotOwned atomic.Uint64 // frame exists but the submitter does not own it
	RejectedLength   atomic.Uint64 // Off+Len beyond the frame
	RejectedStale    atomic.Uint64 // descriptors from a reclaimed or unknown AppID
	DoubleFree       atomic.Uint64 // frame freed while already free
}

// PoolStats is a snapshot of the pool's accounting. Two snapshots compare
// equal with == when no frame changed hands between them.
type PoolStats struct {
	Frames, DaemonFrames, AppFrames uint32
	Partitions                      int
	DaemonFree, DaemonHeld, Lent    uint32 // daemon partition, by state
	AppsAttached, AppsDraining      int
	AppOwned, InFlight              uint32 // application partitions, by state
}

// Pool is the daemon's ledger of buffer ownership over a buffer area of
// Frames frames: the daemon partition's free list, the per-application TX
// partitions, and the owner of every frame. It manages indices only; the
// frames themselves live in a BufferArea (or the afxdp UMEM) mapped elsewhere.
//
// The ledger lives in the daemon's private memory: nothing an application
// writes into shared memory can change it. Every index an application hands
// the daemon goes through CheckTX, AcceptTX or AcceptReleased, which check
// bounds and ownership and count and drop what fails, so a buggy or hostile
// application can neither crash the daemon nor make it transmit memory it
// does not own.
//
// A Pool has one owner, the daemon's core loop goroutine: its methods are not
// safe for concurrent use. Only Counters may be read from other goroutines.
type Pool struct {
	cfg       PoolConfig
	state     []uint32
	free      []uint32 // stack of stFree frames
	apps      []appSlot
	freeSlots []int // stack of idle slots
	held      uint32
	lent      uint32
	appOwned  uint32
	inFlight  uint32
	attached  int
	draining  int
	counters  PoolCounters
}

// NewPool builds a pool over cfg.Frames frames: every daemon frame free, every
// application partition idle.
func NewPool(cfg PoolConfig) (*Pool, error) {
	cfg = cfg.populate()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Pool{
		cfg:   cfg,
		state: make([]uint32, cfg.Frames),
		free:  make([]uint32, 0, cfg.DaemonFrames),
	}
	for f := int64(cfg.DaemonFrames) - 1; f >= 0; f-- {
		p.state[f] = stFree
		p.free = append(p.free, uint32(f))
	}
	for f := cfg.DaemonFrames; f < cfg.Frames; f++ {
		p.state[f] = stIdle
	}
	n := int((cfg.Frames - cfg.DaemonFrames) / cfg.AppFrames)
	p.apps = make([]appSlot, n)
	p.freeSlots = make([]int, 0, n)
	for i := n - 1; i >= 0; i-- {
		p.apps[i].part = Partition{First: cfg.DaemonFrames + uint32(i)*cfg.AppFrames, Count: cfg.AppFrames}
		p.freeSlots = append(p.freeSlots, i)
	}
	return p, nil
}

// Config returns the populated configuration.
func (p *Pool) Config() PoolConfig { return p.cfg }

// Counters returns the rejection counters (safe from any goroutine).
func (p *Pool) Counters() *PoolCounters { return &p.counters }

// Stats returns the accounting snapshot. O(1).
func (p *Pool) Stats() PoolStats {
	return PoolStats{
		Frames:       p.cfg.Frames,
		DaemonFrames: p.cfg.DaemonFrames,
		AppFrames:    p.cfg.AppFrames,
		Partitions:   len(p.apps),
		DaemonFree:   uint32(len(p.free)),
		DaemonHeld:   p.held,
		Lent:         p.lent,
		AppsAttached: p.attached,
		AppsDraining: p.draining,
		AppOwned:     p.appOwned,
		InFlight:     p.inFlight,
	}
}

// DaemonPartition is the range of the daemon's own frames.
func (p *Pool) DaemonPartition() Partition { return Partition{0, p.cfg.DaemonFrames} }

// live returns the slot of a live (attached) app, or nil.
func (p *Pool) live(app AppID) *appSlot {
	s := app.slot()
	if s < 0 || s >= len(p.apps) {
		return nil
	}
	a := &p.apps[s]
	if a.gen != app.gen() || a.state != slotAttached {
		return nil
	}
	return a
}

// AttachApp assigns a free partition to a new application. All its frames
// start owned by the application. ErrNoPartition when every partition is in
// use or draining.
func (p *Pool) AttachApp() (AppID, Partition, error) {
	if len(p.freeSlots) == 0 {
		return 0, Partition{}, ErrNoPartition
	}
	s := p.freeSlots[len(p.freeSlots)-1]
	p.freeSlots = p.freeSlots[:len(p.freeSlots)-1]
	a := &p.apps[s]
	a.gen++
	if a.gen == 0 {
		a.gen = 1
	}
	a.state = slotAttached
	a.lent, a.inFlight = 0, 0
	for f := a.part.First; f < a.part.First+a.part.Count; f++ {
		p.state[f] = stApp
	}
	p.appOwned += a.part.Count
	p.attached++
	return makeAppID(s, a.gen), a.part, nil
}

// Alloc takes up to len(dst) free daemon frames (for the fill ring, or for
// the daemon's own packets) and returns how many it took. A short count is
// backpressure: the daemon partition is exhausted.
func (p *Pool) Alloc(dst []uint32) int {
	n := min(len(dst), len(p.free))
	top := len(p.free) - n
	for i := 0; i < n; i++ {
		f := p.free[len(p.free)-1-i] // most recently freed first (warm in cache)
		p.state[f] = stDaemon
		dst[i] = f
	}
	p.free = p.free[:top]
	p.held += uint32(n)
	return n
}

// Free returns daemon-held frames to the free list. A frame that is not a
// daemon frame held by the daemon is skipped and counted (ErrDoubleFree if
// it was already free); Free returns how many it freed and the first error.
func (p *Pool) Free(frames []uint32) (int, error) {
	var first error
	n := 0
	for _, f := range frames {
		var err error
		switch {
		case f >= p.cfg.DaemonFrames:
			p.counters.RejectedRange.Add(1)
			err = ErrFrameRange
		case p.state[f] == stFree:
			p.counters.DoubleFree.Add(1)
			err = ErrDoubleFree
		case p.state[f] != stDaemon:
			p.counters.RejectedNotOwned.Add(1)
			err = ErrFrameNotOwned
		default:
			p.state[f] = stFree
			p.free = append(p.free, f)
			p.held--
			n++
			continue
		}
		if first == nil {
			first = err
		}
	}
	return n, first
}

// Lend records that daemon-held frames were handed to app (produced on one
// of its RX rings). Call it right after a successful Produce, for exactly the
// frames produced, before the core loop next reads app's release ring. Frames
// the daemon does not hold are skipped and counted.
func (p *Pool) Lend(app AppID, frames []uint32) (int, error) {
	a := p.live(app)
	if a == nil {
		return 0, ErrStaleApp
	}
	tag := uint32(stLent) | uint32(app.slot())<<8
	var first error
	n := 0
	for _, f := range frames {
		if f >= p.cfg.DaemonFrames || p.state[f] != stDaemon {
			p.counters.RejectedNotOwned.Add(1)
			if first == nil {
				first = ErrFrameNotOwned
			}
			continue
		}
		p.state[f] = tag
		n++
	}
	a.lent += uint32(n)
	p.lent += uint32(n)
	p.held -= uint32(n)
	return n, first
}

// AcceptReleased takes back daemon frames app returned on its release ring.
// Each descriptor's frame must be a daemon frame currently lent to app;
// anything else is counted and dropped. Returns how many frames went back to
// the free list.
func (p *Pool) AcceptReleased(app AppID, ds []Desc) int {
	a := p.live(app)
	if a == nil {
		p.counters.RejectedStale.Add(uint64(len(ds)))
		return 0
	}
	tag := uint32(stLent) | uint32(app.slot())<<8
	n := 0
	for i := range ds {
		f := ds[i].Frame
		switch {
		case f >= p.cfg.Frames:
			p.counters.RejectedRange.Add(1)
		case p.state[f] != tag:
			p.counters.RejectedNotOwned.Add(1)
		default:
			p.state[f] = stFree
			p.free = append(p.free, f)
			n++
		}
	}
	a.lent -= uint32(n)
	p.lent -= uint32(n)
	return n
}

// CheckTX validates one TX descriptor from app and, if it is valid, takes
// the frame into flight (the daemon now holds it). Returns a sentinel
// (ErrStaleApp, ErrFrameRange, ErrFrameNotOwned, ErrBadLength) without
// allocating; the rejection is counted.
func (p *Pool) CheckTX(app AppID, d *Desc) error {
	a := p.live(app)
	if a == nil {
		p.counters.RejectedStale.Add(1)
		return ErrStaleApp
	}
	return p.checkSubmit(a, d)
}

// checkSubmit validates a TX descriptor of slot a.
func (p *Pool) checkSubmit(a *appSlot, d *Desc) error {
	f := d.Frame
	if f >= p.cfg.Frames {
		p.counters.RejectedRange.Add(1)
		return ErrFrameRange
	}
	if !a.part.Contains(f) {
		// A real frame, but the daemon's or another application's.
		p.counters.RejectedNotOwned.Add(1)
		return ErrFrameNotOwned
	}
	if uint32(d.Off)+uint32(d.Len) > p.cfg.FrameSize {
		p.counters.RejectedLength.Add(1)
		return ErrBadLength
	}
	if p.state[f] == stApp {
		p.state[f] = stInFlight
		a.inFlight++
		p.inFlight++
		p.appOwned--
		return nil
	}
	p.counters.RejectedNotOwned.Add(1)
	return ErrFrameNotOwned
}

// AcceptTX validates the descriptors app produced on a TX ring, in place:
// the valid ones are moved to the front of ds (order kept) and their frames
// are now in flight (held by the daemon until CompleteTX); the rest are
// counted and dropped. Returns the number of valid descriptors.
func (p *Pool) AcceptTX(app AppID, ds []Desc) int {
	a := p.live(app)
	if a == nil {
		p.counters.RejectedStale.Add(uint64(len(ds)))
		return 0
	}
	n := 0
	for i := range ds {
		if p.checkSubmit(a, &ds[i]) == nil {
			ds[n] = ds[i]
			n++
		}
	}
	return n
}

// CompleteTX gives in-flight frames back to their application: the daemon
// is done with them (transmitted and, if the engine keeps frames for fast
// retransmit, acknowledged). Produce them on the app's completion ring first,
// then call CompleteTX for exactly the frames produced. For an application
// that was reclaimed, the frames go back to its idle partition instead, and
// the partition is reusable once the last one is back. Frames not in flight
// for app are skipped and counted.
func (p *Pool) CompleteTX(app AppID, frames []uint32) (int, error) {
	s := app.slot()
	if s < 0 || s >= len(p.apps) || p.apps[s].gen != app.gen() || p.apps[s].state == slotIdle {
		return 0, ErrStaleApp
	}
	a := &p.apps[s]
	next := uint32(stApp)
	if a.state == slotDraining {
		next = stIdle
	}
	var first error
	n := 0
	for _, f := range frames {
		if !a.part.Contains(f) || p.state[f] != stInFlight {
			p.counters.RejectedNotOwned.Add(1)
			if first == nil {
				first = ErrFrameNotOwned
			}
			continue
		}
		p.state[f] = next
		n++
	}
	a.inFlight -= uint32(n)
	p.inFlight -= uint32(n)
	if a.state == slotAttached {
		p.appOwned += uint32(n)
	} else if a.inFlight == 0 {
		p.retire(s)
	}
	return n, first
}

// ReclaimReport says what Reclaim took back.
type ReclaimReport struct {
	Lent     uint32 // daemon frames the app held (RX ring or its hands), back on the free list
	AppOwned uint32 // partition frames the app held
	InFlight uint32 // partition frames the daemon still holds; the partition is reused once CompleteTX returns them
}

// Reclaim takes back everything app held after it died (its control
// connection closed): lent daemon frames return to the free list, its
// partition goes idle. Frames the daemon still has in flight for it stay
// accounted until the engine passes them to CompleteTX (its AF_XDP
// completions); the partition becomes reusable when the last one is back.
// From now on every descriptor carrying app is rejected as stale.
func (p *Pool) Reclaim(app AppID) (ReclaimReport, error) {
	a := p.live(app)
	if a == nil {
		return ReclaimReport{}, ErrStaleApp
	}
	s := app.slot()
	tag := uint32(stLent) | uint32(s)<<8
	var r ReclaimReport
	if a.lent > 0 {
		for f := uint32(0); f < p.cfg.DaemonFrames; f++ {
			if p.state[f] == tag {
				p.state[f] = stFree
				p.free = append(p.free, f)
				r.Lent++
			}
		}
	}
	for f := a.part.First; f < a.part.First+a.part.Count; f++ {
		if p.state[f] == stApp {
			p.state[f] = stIdle
			r.AppOwned++
		}
	}
	r.InFlight = a.inFlight
	p.lent -= r.Lent
	p.appOwned -= r.AppOwned
	a.lent = 0
	p.attached--
	a.state = slotDraining
	p.draining++
	if a.inFlight == 0 {
		p.retire(s)
	}
	return r, nil
}

func (p *Pool) retire(s int) {
	p.apps[s].state = slotIdle
	p.draining--
	p.freeSlots = append(p.freeSlots, s)
}

// Audit recomputes the accounting from the per-frame ledger and reports the
// first inconsistency: a leaked frame, a duplicate on the free list, or a
// counter that drifted. O(Frames); for tests and for the daemon's
// consistency checks after reclaim.
func (p *Pool) Audit() error {
	var free, held, lent, appOwned, inFlight uint32
	perLent := make([]uint32, len(p.apps))
	perFlight := make([]uint32, len(p.apps))
	for f, st := range p.state {
		switch st & 0xff {
		case stFree:
			free++
		case stDaemon:
			held++
		case stLent:
			s := int(st >> 8)
			if uint32(f) >= p.cfg.DaemonFrames || s >= len(p.apps) || p.apps[s].state != slotAttached {
				return auditErr("frame %d lent to slot %d which is not attached", f, s)
			}
			lent++
			perLent[s]++
		case stIdle, stApp, stInFlight:
			if uint32(f) < p.cfg.DaemonFrames {
				return auditErr("daemon frame %d in application state %d", f, st)
			}
			s := int((uint32(f) - p.cfg.DaemonFrames) / p.cfg.AppFrames)
			if s >= len(p.apps) {
				if st != stIdle {
					return auditErr("frame %d past the last partition in state %d", f, st)
				}
				continue
			}
			switch st {
			case stApp:
				if p.apps[s].state != slotAttached {
					return auditErr("frame %d app-owned in a slot that is not attached", f)
				}
				appOwned++
			case stInFlight:
				if p.apps[s].state == slotIdle {
					return auditErr("frame %d in flight in an idle slot", f)
				}
				inFlight++
				perFlight[s]++
			}
		default:
			return auditErr("frame %d in unknown state %#x", f, st)
		}
	}
	seen := make(map[uint32]bool, len(p.free))
	for _, f := range p.free {
		if seen[f] {
			return auditErr("frame %d twice on the free list", f)
		}
		seen[f] = true
		if f >= p.cfg.DaemonFrames || p.state[f] != stFree {
			return auditErr("frame %d on the free list in state %#x", f, p.state[f])
		}
	}
	switch {
	case free != uint32(len(p.free)):
		return auditErr("%d frames free in the ledger, %d on the free list", free, len(p.free))
	case held != p.held || lent != p.lent || appOwned != p.appOwned || inFlight != p.inFlight:
		return auditErr("ledger held/lent/appOwned/inFlight %d/%d/%d/%d, counters %d/%d/%d/%d",
			held, lent, appOwned, inFlight, p.held, p.lent, p.appOwned, p.inFlight)
	case free+held+lent != p.cfg.DaemonFrames:
		return auditErr("daemon partition: %d free + %d held + %d lent != %d", free, held, lent, p.cfg.DaemonFrames)
	}
	for s := range p.apps {
		if perLent[s] != p.apps[s].lent || perFlight[s] != p.apps[s].inFlight {
			return auditErr("slot %d: lent %d/%d in flight %d/%d (ledger/counter)", s, perLent[s], p.apps[s].lent, perFlight[s], p.apps[s].inFlight)
		}
	}
	return nil
}

// AuditError reports a pool accounting inconsistency (a leak or a double
// free the counters missed). It means a bug in the daemon, not in an app.
type AuditError struct{ Reason string }

func (e *AuditError) Error() string { return "ring: pool audit: " + e.Reason }

func auditErr(format string, args ...any) error {
	return &AuditError{Reason: fmt.Sprintf(format, args...)}
}

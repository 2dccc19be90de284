package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// MemConfig configures an in-memory cable (NewMemPipe).
type MemConfig struct {
	// FrameCap is the largest frame carried. Zero means 1514 (IPv4 MTU 1500).
	FrameCap int
	// Queue is the number of frames each direction buffers; a frame sent
	// into a full queue is dropped and counted (a NIC ring overflowing).
	// Zero means 4096.
	Queue int
	// Batch is how many transmit buffers AllocTx hands out at most. Zero
	// means 64.
	Batch int
}

func (c *MemConfig) populate() {
	if c.FrameCap == 0 {
		c.FrameCap = 1514
	}
	if c.Queue == 0 {
		c.Queue = 4096
	}
	if c.Batch == 0 {
		c.Batch = 64
	}
}

// MemLink is one end of an in-memory cable: what one end transmits the
// other receives, in order. Each direction is a fixed ring of frame slots
// guarded by a mutex taken once per batch (Receive or Transmit), never per
// frame. Frames are copied once, from the sender's transmit buffer into the
// receiver's slot; Receive hands out the slots themselves.
type MemLink struct {
	mac  [6]byte
	cfg  MemConfig
	in   *memQueue // frames to this end
	peer *MemLink
	hub  map[[6]byte]*MemLink // NewMemHub: the ends frames go to, by destination MAC

	txBufs  [][]byte // AllocTx buffers, reused
	nalloc  int      // handed out since the last Transmit
	pending int      // slots handed out by the last Receive

	// Drop, when set before use, decides per transmitted frame whether the
	// cable loses it (fault injection for tests). Called with the frame.
	Drop func(frame []byte) bool

	dropped atomic.Uint64
	wake    chan struct{}
	timer   *time.Timer // Wait's, reused
	closed  atomic.Bool
}

type memQueue struct {
	mu    sync.Mutex
	slots [][]byte // each cap FrameCap
	lens  []int
	head  int // next to receive
	n     int // frames queued, including handed-out ones not yet released
	ready chan struct{}
}

// NewMemPipe returns the two ends of an in-memory cable with MACs macA and macB.
func NewMemPipe(cfg MemConfig, macA, macB [6]byte) (*MemLink, *MemLink) {
	cfg.populate()
	a := newMemLink(cfg, macA)
	b := newMemLink(cfg, macB)
	a.peer, b.peer = b, a
	return a, b
}

// NewMemHub returns n ends of an in-memory switch, one per MAC in macs: a
// frame goes to the end its destination MAC names (frames for other MACs
// are dropped). For tests with more than two stacks.
func NewMemHub(cfg MemConfig, macs ...[6]byte) []*MemLink {
	cfg.populate()
	hub := make(map[[6]byte]*MemLink, len(macs))
	links := make([]*MemLink, len(macs))
	for i, mac := range macs {
		links[i] = newMemLink(cfg, mac)
		links[i].hub = hub
		hub[mac] = links[i]
	}
	return links
}

func newMemLink(cfg MemConfig, mac [6]byte) *MemLink {
	q := &memQueue{slots: make([][]byte, cfg.Queue), lens: make([]int, cfg.Queue), ready: make(chan struct{}, 1)}
	for i := range q.slots {
		q.slots[i] = make([]byte, cfg.FrameCap)
	}
	l := &MemLink{mac: mac, cfg: cfg, in: q, wake: make(chan struct{}, 1)}
	l.txBufs = make([][]byte, cfg.Batch)
	for i := range l.txBufs {
		l.txBufs[i] = make([]byte, 0, cfg.FrameCap)
	}
	return l
}

// MAC implements Link.
func (l *MemLink) MAC() [6]byte { return l.mac }

// FrameCap implements Link.
func (l *MemLink) FrameCap() int { return l.cfg.FrameCap }

// Dropped is the number of frames lost toward this end (queue full or Drop).
func (l *MemLink) Dropped() uint64 { return l.dropped.Load() }

// Receive implements Link.
func (l *MemLink) Receive(frames [][]byte) int {
	q := l.in
	q.mu.Lock()
	n := min(q.n-l.pending, len(frames))
	size := len(q.slots)
	for i := 0; i < n; i++ {
		j := (q.head + l.pending + i) % size
		frames[i] = q.slots[j][:q.lens[j]]
	}
	l.pending += n
	q.mu.Unlock()
	return n
}

// ReleaseReceived implements Link.
func (l *MemLink) ReleaseReceived() {
	if l.pending == 0 {
		return
	}
	q := l.in
	q.mu.Lock()
	q.head = (q.head + l.pending) % len(q.slots)
	q.n -= l.pending
	l.pending = 0
	q.mu.Unlock()
}

// AllocTx implements Link.
func (l *MemLink) AllocTx(bufs [][]byte) int {
	n := min(len(bufs), len(l.txBufs)-l.nalloc)
	for i := 0; i < n; i++ {
		bufs[i] = l.txBufs[l.nalloc+i][:0]
	}
	l.nalloc += n
	return n
}

// SwapTx implements Link.
func (l *MemLink) SwapTx(i, j int) { l.txBufs[i], l.txBufs[j] = l.txBufs[j], l.txBufs[i] }

// Transmit implements Link: frames are copied into the peer's queue.
func (l *MemLink) Transmit(frames [][]byte) error {
	l.nalloc = 0
	if len(frames) == 0 || l.closed.Load() {
		return nil
	}
	if l.hub == nil {
		l.deliver(l.peer, frames)
		return nil
	}
	for i := 0; i < len(frames); { // runs of frames to one end, one lock each
		dst := memDst(frames[i])
		j := i + 1
		for j < len(frames) && memDst(frames[j]) == dst {
			j++
		}
		if p := l.hub[dst]; p != nil {
			l.deliver(p, frames[i:j])
		}
		i = j
	}
	return nil
}

func memDst(f []byte) (mac [6]byte) {
	copy(mac[:], f)
	return mac
}

// deliver copies frames into p's queue.
func (l *MemLink) deliver(p *MemLink, frames [][]byte) {
	q := p.in
	q.mu.Lock()
	size := len(q.slots)
	for _, f := range frames {
		if (l.Drop != nil && l.Drop(f)) || q.n == size || len(f) > p.cfg.FrameCap {
			p.dropped.Add(1)
			continue
		}
		j := (q.head + q.n) % size
		q.lens[j] = copy(q.slots[j][:cap(q.slots[j])], f)
		q.n++
	}
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Wait implements Link.
func (l *MemLink) Wait(timeout time.Duration) error {
	q := l.in
	q.mu.Lock()
	avail := q.n > l.pending
	q.mu.Unlock()
	if avail {
		return nil
	}
	if timeout < 0 {
		select {
		case <-q.ready:
		case <-l.wake:
		}
		return nil
	}
	// One goroutine waits at a time (the Link contract), so one timer,
	// made on first use and reset for each wait, serves every sleep.
	if l.timer == nil {
		l.timer = time.NewTimer(timeout)
	} else {
		l.timer.Reset(timeout)
	}
	select {
	case <-q.ready:
	case <-l.wake:
	case <-l.timer.C:
	}
	l.timer.Stop() // Go 1.23+: a stopped timer's channel holds no stale tick
	return nil
}

// Kick implements Link: Transmit delivered the frames already.
func (l *MemLink) Kick() error { return nil }

// Wake implements Link.
func (l *MemLink) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Close implements Link: later transmits are discarded.
func (l *MemLink) Close() error {
	l.closed.Store(true)
	l.Wake()
	return nil
}

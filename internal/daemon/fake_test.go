package daemon

import (
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// loopTransport is an in-memory Transport: every Dial connects to a port
// listened on the same transport (whatever the address), with bounded
// per-direction buffers so backpressure is exercised. Zero-RTT like NDP:
// the acceptor learns of a connection when its first data or FIN arrives.
// Test-only; the mutex lets tests inspect it while the core runs.
type loopTransport struct {
	mu        sync.Mutex
	bufSize   int
	listening map[uint16]bool
	conns     map[ConnID]*loopConn
	next      ConnID
	events    []TransportEvent
	dials     int

	// Neighbour resolution, as a test drives it: dials to an address in
	// unresolved are pending until resolve(addr, err) finishes them.
	unresolved map[netip.Addr]bool
	dialing    map[ConnID]netip.AddrPort // pending dials
	cancelled  int                       // pending dials the core aborted or released
	finWrites  int                       // Writes that carried the FIN (fin = true, all taken)
	wake       func()
}

type loopConn struct {
	id       ConnID
	peer     *loopConn
	port     uint16 // the acceptor's listened port
	accepted bool   // acceptor side: TEAccepted emitted
	dialer   bool
	rbuf     []byte
	fin      bool // peer's FIN is in rbuf's end
	finSent  bool
	err      error // connection failed
	closed   bool
	released bool
	blocked  bool // a Write was short: TEWritable when the peer reads
}

func newLoopTransport(bufSize int) *loopTransport {
	return &loopTransport{bufSize: bufSize, listening: map[uint16]bool{}, conns: map[ConnID]*loopConn{}}
}

func (t *loopTransport) Listen(port uint16) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.listening[port] {
		return ndp.ErrPortInUse
	}
	t.listening[port] = true
	return nil
}

func (t *loopTransport) Unlisten(port uint16) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.listening, port)
}

func (t *loopTransport) Dial(remote netip.AddrPort, _ DialOptions) (ConnID, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dials++
	t.next++
	if t.unresolved[remote.Addr()] {
		if t.dialing == nil {
			t.dialing = map[ConnID]netip.AddrPort{}
		}
		t.dialing[t.next] = remote
		return t.next, true, nil
	}
	a := &loopConn{id: t.next, dialer: true, port: remote.Port()}
	t.conns[a.id] = a
	return a.id, false, nil
}

func (t *loopTransport) SetWakeup(wake func()) {
	t.mu.Lock()
	t.wake = wake
	t.mu.Unlock()
}

// setUnresolved makes dials to addr pending (or not).
func (t *loopTransport) setUnresolved(addr netip.Addr, on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unresolved == nil {
		t.unresolved = map[netip.Addr]bool{}
	}
	t.unresolved[addr] = on
}

// resolve finishes every pending dial to addr: with err, or connected. It
// returns how many it finished and wakes the core.
func (t *loopTransport) resolve(addr netip.Addr, err error) int {
	t.mu.Lock()
	n := 0
	for id, remote := range t.dialing {
		if remote.Addr() != addr {
			continue
		}
		delete(t.dialing, id)
		ev := TransportEvent{Kind: TEDialed, Conn: id, Err: err}
		if err == nil {
			t.next++
			a := &loopConn{id: t.next, dialer: true, port: remote.Port()}
			t.conns[a.id] = a
			ev.Dialed = a.id
		}
		t.events = append(t.events, ev)
		n++
	}
	wake := t.wake
	t.mu.Unlock()
	if wake != nil {
		wake()
	}
	return n
}

// pendingDials counts dials waiting for resolve.
func (t *loopTransport) pendingDials() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.dialing)
}

// cancelPending drops a pending dial (Abort / Release of its ID).
func (t *loopTransport) cancelPendingLocked(id ConnID) bool {
	if _, ok := t.dialing[id]; ok {
		delete(t.dialing, id)
		t.cancelled++
		return true
	}
	return false
}

// open creates the acceptor side on first data (zero-RTT).
func (t *loopTransport) open(a *loopConn) bool {
	if a.peer != nil {
		return true
	}
	if !t.listening[a.port] {
		t.fail(a, ndp.ErrConnRefused)
		return false
	}
	t.next++
	b := &loopConn{id: t.next, peer: a, port: a.port}
	a.peer = b
	t.conns[b.id] = b
	t.events = append(t.events, TransportEvent{Kind: TEAccepted, Conn: b.id, LocalPort: a.port, Remote: netip.MustParseAddrPort("10.0.0.1:40000")})
	return true
}

func (t *loopTransport) fail(c *loopConn, err error) {
	if c.closed {
		return
	}
	c.closed, c.err = true, err
	if !c.released {
		t.events = append(t.events, TransportEvent{Kind: TEClosed, Conn: c.id, Err: err})
	} else {
		delete(t.conns, c.id)
	}
}

func (t *loopTransport) Write(id ConnID, p []byte, fin bool) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.writeLocked(id, p)
	if fin && err == nil && n == len(p) {
		t.finWrites++
		err = t.closeWriteLocked(id)
	}
	return n, err
}

func (t *loopTransport) writeLocked(id ConnID, p []byte) (int, error) {
	c := t.conns[id]
	if c == nil || c.released {
		return 0, ndp.ErrInvalidHandle
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.finSent {
		return 0, ndp.ErrClosed
	}
	if !t.open(c) {
		return 0, nil // the failure arrives as TEClosed
	}
	peer := c.peer
	room := t.bufSize - len(peer.rbuf)
	n := min(room, len(p))
	if peer.closed {
		return len(p), nil // the peer is gone: bytes vanish, like a reset in flight
	}
	peer.rbuf = append(peer.rbuf, p[:n]...)
	if n < len(p) {
		c.blocked = true
	}
	if n > 0 {
		t.events = append(t.events, TransportEvent{Kind: TEReadable, Conn: peer.id})
	}
	return n, nil
}

func (t *loopTransport) CloseWrite(id ConnID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closeWriteLocked(id)
}

func (t *loopTransport) closeWriteLocked(id ConnID) error {
	c := t.conns[id]
	if c == nil {
		return ndp.ErrInvalidHandle
	}
	if c.err != nil {
		return c.err
	}
	if c.finSent || !t.open(c) {
		return nil
	}
	c.finSent = true
	c.peer.fin = true
	t.events = append(t.events, TransportEvent{Kind: TEReadable, Conn: c.peer.id})
	t.checkDone(c)
	return nil
}

func (t *loopTransport) checkDone(c *loopConn) {
	p := c.peer
	if p == nil {
		return
	}
	if c.finSent && p.finSent && len(c.rbuf) == 0 && len(p.rbuf) == 0 && c.fin && p.fin {
		for _, x := range []*loopConn{c, p} {
			t.fail(x, nil)
		}
	}
}

func (t *loopTransport) Read(id ConnID, p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.conns[id]
	if c == nil {
		return 0, ndp.ErrInvalidHandle
	}
	if c.err != nil {
		return 0, c.err
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	if n > 0 {
		if c.peer != nil && c.peer.blocked {
			c.peer.blocked = false
			t.events = append(t.events, TransportEvent{Kind: TEWritable, Conn: c.peer.id})
		}
		return n, nil
	}
	if c.fin {
		t.checkDone(c)
		return 0, io.EOF
	}
	return 0, nil
}

func (t *loopTransport) Release(id ConnID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancelPendingLocked(id) {
		return
	}
	c := t.conns[id]
	if c == nil {
		return
	}
	c.released = true
	switch {
	case c.closed:
		delete(t.conns, id)
	case !c.fin || len(c.rbuf) > 0:
		t.abortLocked(c)
	default:
		if !c.finSent && c.peer != nil {
			c.finSent = true
			c.peer.fin = true
			t.events = append(t.events, TransportEvent{Kind: TEReadable, Conn: c.peer.id})
		}
		t.checkDone(c)
		if c.peer == nil {
			delete(t.conns, id)
		}
	}
}

func (t *loopTransport) abortLocked(c *loopConn) {
	t.fail(c, ndp.ErrClosed)
	if c.peer != nil {
		t.fail(c.peer, ndp.ErrConnReset)
	}
	delete(t.conns, c.id)
}

func (t *loopTransport) Abort(id ConnID, _ ndp.ResetCode) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancelPendingLocked(id) {
		return
	}
	if c := t.conns[id]; c != nil {
		c.released = true
		t.abortLocked(c)
	}
}

func (t *loopTransport) Poll(bool, bool) bool { return false }

func (t *loopTransport) Events(dst []TransportEvent) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := copy(dst, t.events)
	t.events = t.events[:copy(t.events, t.events[n:])]
	return n
}

func (t *loopTransport) PollTimeout() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.events) > 0 {
		return 0
	}
	return -1
}

func (t *loopTransport) WaitFD() int { return -1 }

// live returns the number of connections the transport still holds.
func (t *loopTransport) live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

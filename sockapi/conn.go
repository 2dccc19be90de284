package sockapi

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Conn is an NDP connection. It implements net.Conn: Read and Write may be
// called concurrently (one of each at a time, as with any net.Conn);
// deadlines are honoured (os.ErrDeadlineExceeded, a net.Error with
// Timeout() true); Close unblocks Read and Write with net.ErrClosed.
type Conn struct {
	s      *Stack // the stack whose free list CloseAndReuse returns c to (nil: none)
	b      backendConn
	local  Addr
	remote Addr
	rd, wd deadline
	probe  [1]byte // readMessage's end-of-message probe
}

func newConn(b backendConn, localIP Addr) *Conn {
	c := &Conn{}
	c.init(b, localIP)
	return c
}

func (c *Conn) init(b backendConn, localIP Addr) {
	ip, port := b.remote()
	c.b, c.local, c.remote = b, Addr{IP: localIP.IP, Port: b.localPort()}, Addr{IP: ip, Port: port}
}

func (c *Conn) opErr(op string, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &net.OpError{Op: op, Net: "ndp", Source: c.local, Addr: c.remote, Err: err}
}

// Read implements net.Conn. It returns io.EOF after the peer closed its
// write side and every byte was read.
func (c *Conn) Read(p []byte) (int, error) {
	cancel := c.rd.wait()
	if isClosedChan(cancel) {
		return 0, c.opErr("read", os.ErrDeadlineExceeded)
	}
	n, err := c.b.read(p, 1, cancel)
	return n, c.opErr("read", err)
}

// readAtLeast is Read for readMessage: it may wait for atLeast bytes or
// the end of the stream.
func (c *Conn) readAtLeast(p []byte, atLeast int) (int, error) {
	cancel := c.rd.wait()
	if isClosedChan(cancel) {
		return 0, c.opErr("read", os.ErrDeadlineExceeded)
	}
	n, err := c.b.read(p, atLeast, cancel)
	return n, c.opErr("read", err)
}

// Write implements net.Conn: it writes all of p unless an error occurs.
func (c *Conn) Write(p []byte) (int, error) {
	cancel := c.wd.wait()
	if isClosedChan(cancel) {
		return 0, c.opErr("write", os.ErrDeadlineExceeded)
	}
	n, err := c.b.write(p, false, cancel)
	return n, c.opErr("write", err)
}

// WriteAndClose writes p and closes the write side (FIN) in the same
// batch, so a short message and its end leave in one packet: the zero-RTT
// request of an RPC.
func (c *Conn) WriteAndClose(p []byte) (int, error) {
	cancel := c.wd.wait()
	if isClosedChan(cancel) {
		return 0, c.opErr("write", os.ErrDeadlineExceeded)
	}
	n, err := c.b.write(p, true, cancel)
	return n, c.opErr("write", err)
}

// CloseWrite closes the write side: the peer reads io.EOF after the data
// written so far. Reading continues to work.
func (c *Conn) CloseWrite() error { return c.opErr("close", c.b.closeWrite()) }

// Close implements net.Conn. If the peer's data was read to the end, the
// write side is closed gracefully and the stack finishes delivering it in
// the background; otherwise the connection is reset (as TCP does on close
// with unread data). Blocked Read and Write return net.ErrClosed.
func (c *Conn) Close() error { return c.opErr("close", c.b.close()) }

// CloseAndReuse is Close for a Conn the caller drops: once it returns,
// neither c nor any copy of the pointer may be used again (not even
// Close), and no call on c may still be running. The stack reuses c, and
// an embedded stack its connection state, for a later Accept, Dial or
// CallInto, so a server that closes each accepted connection this way
// allocates nothing per connection in steady state.
func (c *Conn) CloseAndReuse() error {
	err := c.opErr("close", c.b.closeReuse())
	if c.s != nil {
		c.s.putCallConn(c)
	}
	return err
}

// Abort resets the connection: the peer's calls fail with ErrConnReset.
func (c *Conn) Abort() error { return c.opErr("close", c.b.abort()) }

// LocalAddr implements net.Conn (an Addr; Port is 0 for dialed
// connections, whose ephemeral NDP port the stack picks internally).
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr implements net.Conn (an Addr).
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline implements net.Conn.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

// SetReadDeadline implements net.Conn.
func (c *Conn) SetReadDeadline(t time.Time) error { c.rd.set(t); return nil }

// SetWriteDeadline implements net.Conn.
func (c *Conn) SetWriteDeadline(t time.Time) error { c.wd.set(t); return nil }

var _ net.Conn = (*Conn)(nil)

// Listener accepts NDP connections on one port. It implements net.Listener.
type Listener struct {
	s     *Stack
	b     backendListener
	local Addr
	dl    deadline

	msgMu  sync.Mutex
	msgCfg MessageConfig // SetMessageConfig
	msg    *msgServer    // started by the first RecvMessage
	msgCnt *messageCounters
}

// Accept implements net.Listener (the net.Conn is a *Conn).
func (l *Listener) Accept() (net.Conn, error) { return l.AcceptNDP() }

// AcceptNDP is Accept returning the concrete type.
func (l *Listener) AcceptNDP() (*Conn, error) {
	bc, err := l.b.accept(l.dl.wait())
	if err != nil {
		return nil, &net.OpError{Op: "accept", Net: "ndp", Addr: l.local, Err: err}
	}
	return l.s.callConn(bc), nil
}

// SetDeadline bounds Accept and RecvMessage calls (zero: none).
func (l *Listener) SetDeadline(t time.Time) error { l.dl.set(t); return nil }

// Close implements net.Listener: blocked Accept and RecvMessage calls
// return net.ErrClosed; connections not yet accepted, and messages read
// ahead but not yet handed out by RecvMessage, are reset.
func (l *Listener) Close() error {
	err := l.b.close()
	l.msgMu.Lock()
	m := l.msg
	l.msgMu.Unlock()
	if m != nil {
		m.close()
	}
	if err != nil {
		return &net.OpError{Op: "close", Net: "ndp", Addr: l.local, Err: err}
	}
	return nil
}

// Addr implements net.Listener.
func (l *Listener) Addr() net.Addr { return l.local }

var _ net.Listener = (*Listener)(nil)

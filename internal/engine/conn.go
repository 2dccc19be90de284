package engine

import (
	"errors"
	"io"
	"net"

	"github.com/ndpstack/ndpstack/ndp"
)

// Conn is one NDP connection of a Stack. Its methods are safe for
// concurrent use: one Read and one Write may block at the same time, and
// Close unblocks both.
type Conn struct {
	s         *Stack
	h         ndp.Handle
	remote    ndp.Addr
	localPort uint16 // the listened port (accepted) or the chosen local port (dialed)

	// D3 hints and priority the connection was opened with.
	Priority uint8
	Size     int64
	Deadline ndp.Time

	// Guarded by s.mu.
	closed      bool  // the endpoint finished the connection (EventClosed)
	err         error // its reason (nil: clean)
	released    bool  // Close was called
	stackClosed bool
	orphan      bool // closed by the application, still draining the peer's stream
	reuse       bool // CloseAndReuse: the stack reuses this Conn once the endpoint releases it

	// rdWait and wrWait (capacity 1, see signal; made lazily by
	// waitChanLocked, kept when the Conn is reused) are where a blocked
	// Read and Write wait: for their connection's events, and for Close
	// or Stack.Close, which signal both. A woken call checks its
	// condition and the connection's state again.
	rdWait, wrWait chan struct{}
	// rdMin is what a blocked ReadAtLeast waits for: the stack wakes it
	// when this many bytes are buffered or the stream ended, not for each
	// arriving packet. 0 or 1: any byte (Read).
	rdMin int
}

// Handle is the connection's endpoint handle.
func (c *Conn) Handle() ndp.Handle { return c.h }

// Remote is the peer's address.
func (c *Conn) Remote() ndp.Addr { return c.remote }

// LocalPort is the connection's local NDP port: the listened port an accepted
// connection arrived on, or the port a dialed one was given (ephemeral unless asked).
func (c *Conn) LocalPort() uint16 { return c.localPort }

// Stack is the connection's stack.
func (c *Conn) Stack() *Stack { return c.s }

// waitChanLocked returns the channel a blocking call waits on (*wait,
// made on first use). Channels are only made once a call is about to block, so connections that never block
// (busy polling, short waits) allocate none. The caller makes them at the
// top of the locked iteration after which it blocks, before its condition
// checks and before any poll: the endpoint signals an event once (an
// EventWritable clears the write-blocked state that produced it), so an
// event raised by a poll in that iteration while the channel did not
// exist yet would be lost for good, and the waiter would sleep forever on
// an idle connection.
func (c *Conn) waitChanLocked(wait *chan struct{}) chan struct{} {
	if *wait == nil {
		*wait = make(chan struct{}, 1)
	}
	return *wait
}

// wakeWaitersLocked wakes a blocked Read and Write: they find the
// connection closed (stateErrLocked) and return.
func (c *Conn) wakeWaitersLocked() {
	signal(c.rdWait)
	signal(c.wrWait)
}

// errLocalClosed is what a call on a Conn after Close returns.
var errLocalClosed = net.ErrClosed

// stateErrLocked returns the error a call must return given local state, or nil.
func (c *Conn) stateErrLocked() error {
	switch {
	case c.stackClosed:
		return ErrStackClosed
	case c.released:
		return errLocalClosed
	}
	return nil
}

// Read reads in-order bytes into p, blocking until some are available, the
// peer closed its side (io.EOF), the connection failed (its error:
// ndp.ErrConnReset, ndp.ErrConnRefused, ndp.ErrDeadlineUnmeetable,
// ndp.ErrTimeout), Close was called (net.ErrClosed), or cancel is closed
// (os.ErrDeadlineExceeded). cancel may be nil.
func (c *Conn) Read(p []byte, cancel <-chan struct{}) (int, error) {
	return c.read(p, 1, cancel)
}

// ReadBuffered copies in-order bytes already received into p and returns
// at once: it neither waits nor polls the stack. (0, nil) means none are
// buffered and the stream goes on; io.EOF after the peer's FIN; the
// connection's error once it failed. It is for an embedder whose own loop
// polls (NoBackground: ndpd's core loop polls once per iteration), where
// Read's poll when nothing is buffered (and, during a pulled transfer,
// after every read) would be one more batch of network work per read: a
// bulk receiver's core reads a 2 KB frame at a time, and each of those
// polls released a PULL or two in a kick of its own.
func (c *Conn) ReadBuffered(p []byte) (int, error) {
	s := c.s
	s.mu.Lock()
	n, err, _ := c.tryReadLocked(p, 1, 0)
	s.mu.Unlock()
	return n, err
}

// ReadAtLeast is Read for a caller that has no use for fewer than n bytes
// while the stream goes on (a message read to its end): it blocks until n
// bytes are buffered, the stream arrived up to its end, or an error, and its
// goroutine is not woken for every arriving packet meanwhile (a 1 MB
// response woke its reader about 700 times; SO_RCVLOWAT is the kernel's
// counterpart). n is capped at len(p) and at a quarter of the receive
// buffer, so the window never waits on the reader. When n > 1 and the bytes
// it returns end the stream (the peer's FIN follows them) it returns them
// with io.EOF, as io.Reader allows: a message reader learns the end without
// another call (an RPC client's, 0.2 µs on its critical path).
func (c *Conn) ReadAtLeast(p []byte, n int, cancel <-chan struct{}) (int, error) {
	return c.read(p, max(1, min(n, len(p), c.s.ep.Config().RecvBuffer/4)), cancel)
}

func (c *Conn) read(p []byte, atLeast int, cancel <-chan struct{}) (int, error) {
	s := c.s
	var w waitState
	var ch chan struct{}
	for {
		if !s.lockWaiter(&w) {
			if err := s.await(&w, ch, nil, cancel); err != nil {
				s.mu.Lock()
				c.rdMin = 0
				s.mu.Unlock()
				return 0, err
			}
			continue
		}
		if w.wantBlock {
			// Made before this iteration's polls: an EventReadable they
			// produce must find the channel (see waitChanLocked).
			ch = c.waitChanLocked(&c.rdWait)
		}
		// At most one clock read per iteration, taken by the poll
		// after it received (spinPollLocked): the poll, the events a
		// read drains and await's spin window all use it (a spinning
		// reader read the clock three times per turn, 9% of an
		// 8-client run's CPU samples). A read that finds its data
		// buffered reads none.
		var now ndp.Time
		n, err, ok := c.tryReadLocked(p, atLeast, 0)
		if !ok {
			now = s.spinPollLocked(s.coalesce, w.spun)
			n, err, ok = c.tryReadLocked(p, atLeast, now)
			if !ok && s.txDeferred {
				s.pollLocked(now)
			}
		} else if n > 0 && s.pulls.Len() > 0 {
			// A transfer is being pulled: poll once before the
			// application goes off to work through what it read, so
			// the PULLs due (and the frames waiting) do not wait for
			// its next call. A reader that finds data buffered on
			// every call would otherwise not poll at all.
			s.spinPollLocked(false, false)
		}
		c.rdMin = 0
		if !ok {
			c.rdMin = atLeast
		}
		s.unlock()
		if ok {
			s.endWait(&w)
			return n, err
		}
		w.now = now
		if err := s.await(&w, ch, nil, cancel); err != nil {
			s.mu.Lock()
			c.rdMin = 0
			s.mu.Unlock()
			return 0, err
		}
	}
}

// tryReadLocked reads if atLeast bytes are buffered or the stream ended;
// ok false: the caller waits. now is the caller's clock reading, taken
// under the lock (0: none; the drain reads it if an event needs it).
func (c *Conn) tryReadLocked(p []byte, atLeast int, now ndp.Time) (int, error, bool) {
	if err := c.stateErrLocked(); err != nil {
		return 0, err, true
	}
	if !c.readReadyLocked(atLeast) {
		return 0, nil, false
	}
	n, err := c.s.ep.Read(c.h, p)
	if n > 0 {
		// Reading made room: the endpoint may have handed out PULLs.
		c.s.drainEventsLocked(now)
		if atLeast > 1 {
			// A message read (ReadAtLeast): report the end with the
			// bytes that reached it (the endpoint's EOF, never its
			// error, which the next call returns).
			if _, end := c.s.ep.Read(c.h, nil); end == io.EOF {
				return n, io.EOF, true
			}
		}
		return n, nil, true
	}
	if err != nil {
		return 0, err, true
	}
	if len(p) == 0 {
		return 0, nil, true
	}
	if c.closed {
		if c.err != nil {
			return 0, c.err, true
		}
		return 0, io.EOF, true
	}
	return 0, nil, false
}

// readReadyLocked reports whether a read wanting atLeast bytes should go
// ahead: that many are buffered, the stream ended or failed, or the
// connection closed.
func (c *Conn) readReadyLocked(atLeast int) bool {
	return atLeast <= 1 || c.closed || c.s.ep.Readable(c.h) >= atLeast || c.s.ep.ReadEnded(c.h)
}

// Write writes all of p (blocking while the send buffer is full). With
// closeWrite the write side is closed after p (FIN), in the same batch, so
// a short message and its FIN leave in one packet. It returns early with
// the connection's error, net.ErrClosed after Close, or
// os.ErrDeadlineExceeded when cancel is closed.
func (c *Conn) Write(p []byte, closeWrite bool, cancel <-chan struct{}) (int, error) {
	s := c.s
	var w waitState
	var ch chan struct{}
	written := 0
	for {
		if !s.lockWaiter(&w) {
			if err := s.await(&w, ch, nil, cancel); err != nil {
				return written, err
			}
			continue
		}
		if w.wantBlock {
			// Made before this iteration's poll (afterCallUnlock): the
			// ACKs it handles may free the buffer, and their
			// EventWritable must find the channel (see waitChanLocked).
			ch = c.waitChanLocked(&c.wrWait)
		}
		if err := c.stateErrLocked(); err != nil {
			s.mu.Unlock()
			s.endWait(&w)
			return written, err
		}
		now := s.clock()
		if written < len(p) {
			n, err := s.ep.Write(c.h, p[written:], now)
			written += n
			if err != nil {
				s.afterCallUnlock(now)
				s.endWait(&w)
				return written, c.mapEndpointErr(err)
			}
		}
		if written == len(p) {
			var err error
			if closeWrite {
				err = s.ep.CloseWrite(c.h, now)
			}
			s.afterCallUnlock(now)
			s.endWait(&w)
			return written, c.mapEndpointErr(err)
		}
		s.afterCallUnlock(now)
		if err := s.await(&w, ch, nil, cancel); err != nil {
			return written, err
		}
	}
}

// WriteQueued copies as much of p as fits into the send buffer, without
// blocking and without transmitting: the data leaves with the stack's next
// Poll (or any call that transmits). With closeWrite and all of p taken, the
// FIN is queued after p. It is for a caller that polls the stack itself and
// writes many small buffers per poll (ndpd's core loop writes each
// application frame): the poll then sends them as full packets in one
// transmit batch, where Write sends each buffer at once, a short packet and
// a kick per buffer.
func (c *Conn) WriteQueued(p []byte, closeWrite bool) (int, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.stateErrLocked(); err != nil {
		return 0, err
	}
	now := s.clock()
	n, err := s.ep.Write(c.h, p, now)
	if err == nil && closeWrite && n == len(p) {
		err = s.ep.CloseWrite(c.h, now)
	}
	return n, c.mapEndpointErr(err)
}

// CloseWrite closes the write side: the peer reads io.EOF after the data
// written so far.
func (c *Conn) CloseWrite() error {
	s := c.s
	s.mu.Lock()
	if err := c.stateErrLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	now := s.clock()
	err := c.mapEndpointErr(s.ep.CloseWrite(c.h, now))
	s.afterCallUnlock(now)
	return err
}

// mapEndpointErr turns the endpoint's "closed" answers into the reason the
// connection closed.
func (c *Conn) mapEndpointErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ndp.ErrInvalidHandle) {
		if c.err != nil {
			return c.err
		}
		return net.ErrClosed
	}
	return err
}

// Readable is how many bytes Read would return now without blocking.
func (c *Conn) Readable() int {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.released {
		return 0
	}
	return c.s.ep.Readable(c.h)
}

// Err is the reason the connection closed (nil while open or after a clean close).
func (c *Conn) Err() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.err
}

// Close releases the connection: blocked Read and Write return
// net.ErrClosed. If the peer's data was read to the end the write side is
// closed (FIN) and the connection lingers inside the endpoint until its data
// is acknowledged; otherwise it is reset, as TCP does on close with unread
// data.
func (c *Conn) Close() error {
	return c.close(false, ndp.ResetAbort, false)
}

// Abort resets the connection at once (the peer sees a reset) and releases it.
func (c *Conn) Abort() error {
	return c.close(true, ndp.ResetAbort, false)
}

// AbortCode is Abort telling the peer why (its calls fail with code.Err()).
func (c *Conn) AbortCode(code ndp.ResetCode) error {
	return c.close(true, code, false)
}

// CloseAndReuse is Close for a Conn nothing will touch again, not even
// through a copy of the pointer: once the endpoint releases the
// connection, the stack reuses the Conn for a later one, so dialing and
// closing it allocates nothing in steady state. For connections an API
// opens and closes internally (sockapi's CallInto) and for a caller that
// drops the Conn at close (sockapi's Conn.CloseAndReuse: a server that
// closes each accepted connection), never while a call on c may still be
// running.
func (c *Conn) CloseAndReuse() error {
	return c.close(false, ndp.ResetAbort, true)
}

// CloseAndReuseSoon is CloseAndReuse for a Conn whose stream the caller
// read to its end (a read returned io.EOF), off the caller's path: the
// release (the stack's lock, the endpoint's Release, the Conn's reset)
// waits for the stack's next poll that receives nothing, which an RPC
// client reaches after its next request's kick, while it waits for the
// response (CloseAndReuse there took 0.1-0.15 µs of the client's time
// between a response and its next request). One Conn a stack waits so: a
// second call releases the first at once. A Conn whose stream had not
// ended is reset when it is released, as Close does with unread data.
func (c *Conn) CloseAndReuseSoon() {
	c.s.appConns.Add(-1) // the application no longer holds it (await's yield rule)
	if old := c.s.lateClose.Swap(c); old != nil {
		s := old.s
		s.mu.Lock()
		old.releaseSoonLocked()
		s.afterCallUnlock(s.clock()) // a RESET, if its stream had not ended
	}
}

// releaseSoonLocked releases a CloseAndReuseSoon Conn.
func (c *Conn) releaseSoonLocked() {
	if c.released || c.stackClosed {
		return
	}
	c.released, c.reuse = true, true
	c.wakeWaitersLocked()
	c.s.releaseLocked(c)
}

func (c *Conn) close(abort bool, code ndp.ResetCode, reuse bool) error {
	s := c.s
	s.mu.Lock()
	if c.released || c.stackClosed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	c.released, c.reuse = true, reuse
	s.appConns.Add(-1)
	c.wakeWaitersLocked()
	// The clock is read only where a branch needs it: closing a
	// connection that already ended (an RPC's, after its response and
	// FIN) needs none, and a reading is 60-80 ns on the critical path.
	switch {
	case abort && !c.closed:
		s.ep.AbortCode(c.h, s.clock(), code)
	case !c.closed && s.ep.Readable(c.h) == 0:
		if _, err := s.ep.Read(c.h, nil); err == nil {
			now := s.clock()
			// Nothing unread but the peer's stream has not ended: close
			// gracefully as TCP does (FIN, keep reading and discarding
			// until the peer's FIN), instead of the endpoint's Release,
			// which resets a connection whose peer is still sending. The
			// orphan is released on its EventClosed or EOF.
			s.ep.CloseWrite(c.h, now)
			c.orphan = true
			s.afterCallUnlock(now)
			return nil
		}
	}
	s.releaseLocked(c)
	if s.coalesce && !abort {
		// What Close leaves to send is control (the ACK of the last
		// data, a FIN): in busy mode (or without a background poller) the
		// caller is about to make its next
		// call, whose transmit batch carries it (one kick for both; an
		// RPC client's Close is then off the critical path). The
		// background poller, if any, flushes it otherwise.
		s.txDeferred = true
		s.unlock()
		return nil
	}
	s.afterCallUnlock(s.clock())
	return nil
}

// releaseLocked hands the connection back to the endpoint (and a
// CloseAndReuse Conn to the stack's free list).
func (s *Stack) releaseLocked(c *Conn) {
	s.ep.Release(c.h)
	s.pulls.Remove(c.h)
	s.forgetConnLocked(c)
	if c.reuse && len(s.free) < maxFreeConns {
		// Keep the wait channels, without stale tokens.
		rd, wr := c.rdWait, c.wrWait
		drain(rd)
		drain(wr)
		*c = Conn{rdWait: rd, wrWait: wr}
		s.free = append(s.free, c)
	}
}

// maxFreeConns bounds a Stack's free list of reusable Conns.
const maxFreeConns = 256

// drain takes a token left in a wait channel, if any (nil: none).
func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// drainOrphanLocked discards data arriving on an orphaned connection and
// releases it once the peer's stream ended.
func (s *Stack) drainOrphanLocked(c *Conn) {
	for {
		n, err := s.ep.Read(c.h, s.scratch[:])
		if err != nil || c.closed {
			s.releaseLocked(c)
			return
		}
		if n == 0 {
			return
		}
	}
}

// Listener accepts connections on one NDP port.
type Listener struct {
	s     *Stack
	port  uint16
	queue []*Conn // accepted, not yet taken (ring); guarded by s.mu
	head  int
	n     int
	wait  chan struct{}
	done  chan struct{}

	closed bool // guarded by s.mu
}

// Port is the listened NDP port.
func (l *Listener) Port() uint16 { return l.port }

// Accept returns the next inbound connection, blocking until one arrives,
// the listener is closed (net.ErrClosed) or cancel is closed
// (os.ErrDeadlineExceeded).
func (l *Listener) Accept(cancel <-chan struct{}) (*Conn, error) {
	s := l.s
	var w waitState
	for {
		if !s.lockWaiter(&w) {
			if err := s.await(&w, l.wait, l.done, cancel); err != nil {
				return nil, l.acceptErr(err)
			}
			continue
		}
		c, err, ok := l.tryAcceptLocked()
		if !ok {
			// One clock read per iteration, after the poll received
			// (spinPollLocked), shared with await.
			now := s.spinPollLocked(s.coalesce, w.spun)
			c, err, ok = l.tryAcceptLocked()
			if !ok && s.txDeferred {
				s.pollLocked(now)
			}
			w.now = now
		}
		s.unlock()
		if ok {
			s.endWait(&w)
			return c, err
		}
		if err := s.await(&w, l.wait, l.done, cancel); err != nil {
			return nil, l.acceptErr(err)
		}
	}
}

// acceptErr is what Accept returns when its wait ended with err.
func (l *Listener) acceptErr(err error) error {
	if err != errDone {
		return err
	}
	s := l.s
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrStackClosed
	}
	return net.ErrClosed
}

func (l *Listener) tryAcceptLocked() (*Conn, error, bool) {
	if l.closed {
		if l.s.closed {
			return nil, ErrStackClosed, true
		}
		return nil, net.ErrClosed, true
	}
	if l.n == 0 {
		return nil, nil, false
	}
	c := l.queue[l.head]
	l.queue[l.head] = nil
	l.head = (l.head + 1) % len(l.queue)
	l.n--
	return c, nil, true
}

// Close stops accepting: queued, unaccepted connections are reset and
// blocked Accept calls return net.ErrClosed.
func (l *Listener) Close() error {
	s := l.s
	s.mu.Lock()
	if l.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	l.closed = true
	close(l.done)
	s.ep.Unlisten(l.port)
	delete(s.listeners, l.port)
	now := s.clock()
	for ; l.n > 0; l.n-- {
		c := l.queue[l.head]
		l.queue[l.head] = nil
		l.head = (l.head + 1) % len(l.queue)
		c.released = true
		s.appConns.Add(-1)
		c.wakeWaitersLocked()
		s.ep.Abort(c.h, now)
		s.ep.Release(c.h)
		s.pulls.Remove(c.h)
		s.forgetConnLocked(c)
	}
	s.afterCallUnlock(now)
	return nil
}

package daemon

import (
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/ring"
)

// ClientSock is one connection of an attached application: a socket slot
// of its region. Read and Write may run concurrently (one reader and one
// writer at a time, as with net.Conn); Close and Abort unblock both.
type ClientSock struct {
	c      *Client
	slot   int
	remote netip.AddrPort
	port   uint16 // listened port it was accepted on (0 for dialed)
	// dialCookie is the cookie of a dialed socket's OpConnect
	// (connectCookie | dial generation<<32 | slot); 0 for accepted ones.
	dialCookie uint64

	mu      sync.Mutex
	q       []ring.Desc // RX descriptors moved off the ring (by whoever polled), not yet read
	qHead   int
	qLen    int
	off     int   // bytes of q[qHead] already read
	failErr error // the daemon refused the connect
	closed  bool
	notify  chan struct{} // whoever polled → a parked reader: descriptors arrived (cap 1)
	closeCh chan struct{}
}

// newClientSock makes the socket of slot; its RX queue is the slot's
// preallocated one (a slot has one socket at a time).
func newClientSock(c *Client, slot int, remote netip.AddrPort, port uint16) *ClientSock {
	return &ClientSock{c: c, slot: slot, remote: remote, port: port,
		q: c.slotQ[slot], notify: make(chan struct{}, 1), closeCh: make(chan struct{})}
}

// Remote returns the peer's address; LocalPort the listened port (accepted
// connections) or 0.
func (s *ClientSock) Remote() netip.AddrPort { return s.remote }
func (s *ClientSock) LocalPort() uint16      { return s.port }

func (s *ClientSock) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// fill (pollMu held) moves descriptors from RX(slot) into the socket's queue,
// as many as the queue has room for (it is as large as the ring). At the
// OpSlotFree marker the slot's life is over: fill consumes the marker and
// returns freed with every data descriptor still queued, to be released.
func (s *ClientSock) fill(rx *ring.Consumer) (work, freed bool, drop []ring.Desc) {
	s.mu.Lock()
	room := len(s.q) - s.qLen
	var buf [64]ring.Desc
	n, _ := rx.Peek(buf[:min(room+1, len(buf))])
	used := 0
	for ; used < n; used++ {
		if buf[used].Op == OpSlotFree {
			freed = true
			used++
			break
		}
		if s.closed {
			// Nobody will read: hand the frame straight back so the daemon
			// can get to the marker.
			if buf[used].Op == ring.OpData {
				drop = append(drop, buf[used])
			}
			continue
		}
		if s.qLen == len(s.q) {
			break
		}
		s.q[(s.qHead+s.qLen)%len(s.q)] = buf[used]
		s.qLen++
	}
	rx.Release(used)
	s.mu.Unlock()
	if freed {
		drop = append(drop, s.takeAll()...)
	}
	if used > 0 {
		s.wake()
	}
	return used > 0, freed, drop
}

// takeAll empties the queue and returns its data descriptors so their
// frames go back to the daemon.
func (s *ClientSock) takeAll() []ring.Desc {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ring.Desc
	for ; s.qLen > 0; s.qLen-- {
		if d := s.q[s.qHead]; d.Op == ring.OpData {
			out = append(out, d)
		}
		s.qHead = (s.qHead + 1) % len(s.q)
	}
	return out
}

func (s *ClientSock) fail(err error) {
	s.mu.Lock()
	if s.failErr == nil {
		s.failErr = err
	}
	s.mu.Unlock()
	s.wake()
}

// Read copies received bytes into p. It returns io.EOF after the peer's
// FIN, the connection's error (ndp sentinels: reset, refused, deadline
// unmeetable, timeout) once it failed, net.ErrClosed after Close,
// ErrDaemonGone when ndpd stopped, os.ErrDeadlineExceeded at the deadline.
func (s *ClientSock) Read(p []byte, deadline time.Time, cancel <-chan struct{}) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var relBuf [32]ring.Desc
	for {
		// The copy reads the shared buffer area: hold the client lock so a
		// concurrent Client.Close cannot unmap it mid-copy (Close takes mu
		// and sets dead before unmapping). Order: client mu, then socket mu.
		s.c.mu.Lock()
		if s.c.dead {
			s.c.mu.Unlock()
			return 0, s.c.goneErr()
		}
		n, nrel, err, ok := s.readQueued(p, &relBuf)
		if nrel > 0 {
			s.c.releaseFramesLocked(relBuf[:nrel])
		}
		s.c.mu.Unlock()
		if ok {
			return n, err
		}
		if err := s.c.waitFor(s.readable, s.notify, s.closeCh, deadline, cancel); err != nil {
			return 0, err
		}
	}
}

func (s *ClientSock) readable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.qLen > 0 || s.failErr != nil || s.closed
}

// readQueued serves a Read from the queue; ok=false means nothing to return
// yet. The descriptors it finished (at most len(rel)) are copied into rel
// for release; it allocates nothing.
func (s *ClientSock) readQueued(p []byte, rel *[32]ring.Desc) (n, nrel int, err error, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, 0, net.ErrClosed, true
	}
	for s.qLen > 0 && n < len(p) && nrel < len(rel) {
		d := &s.q[s.qHead]
		if d.Op == OpEnd {
			if n > 0 {
				break
			}
			if st := Status(d.Aux); st != StatusOK {
				return 0, nrel, st.Err(), true
			}
			return 0, nrel, io.EOF, true
		}
		data := s.c.buf.Data(d)
		if data == nil || s.off > len(data) {
			data = nil // a descriptor the daemon should never send: skip it
		} else {
			data = data[s.off:]
		}
		k := copy(p[n:], data)
		n += k
		s.off += k
		if k == len(data) {
			rel[nrel] = *d
			nrel++
			s.off = 0
			s.qHead = (s.qHead + 1) % len(s.q)
			s.qLen--
		}
	}
	if n > 0 {
		return n, nrel, nil, true
	}
	if s.failErr != nil {
		return 0, nrel, s.failErr, true
	}
	return 0, nrel, nil, false
}

// Write copies p into frames of the application's partition and publishes
// them on TX(slot). It blocks while the partition or the TX ring is full
// (the daemon hands frames back as the transport takes the bytes).
func (s *ClientSock) Write(p []byte, deadline time.Time, cancel <-chan struct{}) (int, error) {
	c := s.c
	fs := int(c.layout.FrameSize)
	total := 0
	var frames [32]uint32
	var ds [32]ring.Desc
	for len(p) > 0 {
		s.mu.Lock()
		closed, failErr := s.closed, s.failErr
		s.mu.Unlock()
		switch {
		case closed:
			return total, net.ErrClosed
		case failErr != nil:
			return total, failErr
		}
		select {
		case <-c.gone:
			return total, c.goneErr()
		default:
		}
		c.mu.Lock()
		if c.dead {
			c.mu.Unlock()
			return total, c.goneErr()
		}
		tx := c.end.Sockets[s.slot].TX
		free, err := tx.Free()
		if err != nil {
			c.mu.Unlock()
			return total, ErrProtocol
		}
		want := min((len(p)+fs-1)/fs, free, len(frames), int(c.maxInflight-min(c.inflight[s.slot], c.maxInflight)))
		got := c.frames.Pop(frames[:want])
		c.inflight[s.slot] += int32(got)
		for i := 0; i < got; i++ {
			k := copy(c.buf.Frame(frames[i]), p)
			ds[i] = ring.Desc{Frame: frames[i], Len: uint16(k), Conn: uint32(s.slot), Op: ring.OpData}
			p = p[k:]
			total += k
		}
		if got > 0 {
			tx.Produce(ds[:got]) // cannot be short: got <= Free()
			c.end.Notifier.Notify()
			if c.frames.Len() > 0 {
				signalChan(c.framesAvail) // another parked writer may go on
			}
		}
		if got == 0 {
			// Out of frames: the core wakes a sleeper for completions only
			// while the sleep word counts a writer waiting for them (the
			// word is touched under mu while !dead: Close unmaps it).
			atomic.AddUint32(c.sleepWord, appFrameWaiter)
		}
		c.mu.Unlock()
		if got == 0 {
			err := c.waitFor(s.canSend, c.framesAvail, s.closeCh, deadline, cancel)
			c.mu.Lock()
			if !c.dead {
				atomic.AddUint32(c.sleepWord, ^(appFrameWaiter - 1))
			}
			c.mu.Unlock()
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// canSend reports whether a Write could take a frame now: the partition
// has one and this socket is under its in-flight cap.
func (s *ClientSock) canSend() bool {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frames.Len() > 0 && c.inflight[s.slot] < c.maxInflight
}

// CloseWrite sends FIN after the data written so far.
func (s *ClientSock) CloseWrite() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return net.ErrClosed
	}
	return s.c.produceCmd([]ring.Desc{{Frame: ring.NoFrame, Conn: uint32(s.slot), Op: OpCloseWrite}})
}

// Close hands the connection back to the daemon: graceful (FIN after the
// queued data) if the peer's stream ended, an abort otherwise, as TCP does
// on close with unread data. Blocked Read and Write return net.ErrClosed.
func (s *ClientSock) Close() error { return s.shut(ring.OpClose, ndp.ResetAbort) }

// Abort resets the connection (the peer sees ErrConnReset).
func (s *ClientSock) Abort() error { return s.shut(OpAbort, ndp.ResetAbort) }

// AbortCode is Abort telling the peer why: it sees code.Err().
func (s *ClientSock) AbortCode(code ndp.ResetCode) error { return s.shut(OpAbort, code) }

func (s *ClientSock) shut(op ring.Op, code ndp.ResetCode) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.closed = true
	close(s.closeCh)
	s.mu.Unlock()
	if s.c.sleeping.Load() {
		s.c.interrupt() // a sleeper may be waiting for this socket
	}
	return s.c.produceCmd([]ring.Desc{{Frame: ring.NoFrame, Conn: uint32(s.slot), Op: op, Aux: uint64(code)}})
}

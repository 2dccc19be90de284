package sockapi

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// A Listener's message server (RecvMessage) reads messages ahead of the
// calls that take them, many at once, and hands them out in the order they
// complete:
//
//	accept loop (one goroutine) ── takes a pending slot, accepts a connection,
//	   │                           resets it if its peer has MaxPendingPerPeer
//	   │                           messages pending already
//	   ▼
//	message readers (one goroutine per partial message, at most MaxPending):
//	   read to EOF within ReadTimeout and MaxSize ── complete ──▶ ready queue
//	   │                                                              │
//	   └─ too large / timed out / reset: the connection is reset,      ▼
//	      counted in Stats.Messages, the slot freed          RecvMessage
//	                                                       (frees the slot)
//
// A slot is held from accept until RecvMessage hands the message out, so
// at most MaxPending messages (partial or complete) hold buffers and
// connections; while all slots are taken the accept loop stops accepting
// and new connections wait in the listener's backlog (backpressure: the
// stack refuses what overflows the backlog, Stats.AcceptDropped).

// MessageConfig bounds what a Listener's RecvMessage reads ahead. Zero
// values select the documented defaults.
type MessageConfig struct {
	// MaxSize is the largest message accepted, in bytes. A larger one is
	// reset, telling its sender why (its Call fails with
	// ErrMessageTooLarge), and counted in Stats.Messages.TooLarge. Zero
	// means the maxSize of the first RecvMessage call.
	MaxSize int
	// ReadTimeout bounds how long a message may take to arrive, from the
	// moment its connection is accepted until its sender closed its side.
	// A message still partial then is reset and counted in
	// Stats.Messages.TimedOut. Zero means 10 s: long enough for a 16 MiB
	// message at 100 Mb/s or a link outage of a few seconds, short enough
	// that a stalled client holds its buffers and slot briefly.
	ReadTimeout time.Duration
	// MaxPending bounds the messages of this listener that are partial or
	// complete but not yet taken by RecvMessage. While all are taken, new
	// connections wait in the listener's backlog. Zero means 256.
	MaxPending int
	// MaxPendingPerPeer bounds MaxPending's messages from one peer (IPv4
	// address). A connection beyond it is reset at once and counted in
	// Stats.Messages.RefusedPeer, so one client cannot take every slot.
	// Zero means 32.
	MaxPendingPerPeer int
}

const (
	defaultMaxMessage       = 16 << 20
	defaultMessageTimeout   = 10 * time.Second
	defaultMaxPending       = 256
	defaultMaxPendingPerPee = 32
)

func (c *MessageConfig) populate(maxSize int) {
	if c.MaxSize <= 0 {
		c.MaxSize = maxSize
	}
	if c.MaxSize <= 0 {
		c.MaxSize = defaultMaxMessage
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = defaultMessageTimeout
	}
	if c.MaxPending <= 0 {
		c.MaxPending = defaultMaxPending
	}
	if c.MaxPendingPerPeer <= 0 {
		c.MaxPendingPerPeer = defaultMaxPendingPerPee
	}
	c.MaxPendingPerPeer = min(c.MaxPendingPerPeer, c.MaxPending)
}

// MessageStats count what message servers (RecvMessage) of a Stack did
// with the messages they read. Failures of one message are counted here;
// they are never RecvMessage errors.
type MessageStats struct {
	Received    uint64 // messages handed out by RecvMessage
	TooLarge    uint64 // reset: larger than MessageConfig.MaxSize
	TimedOut    uint64 // reset: not complete within MessageConfig.ReadTimeout
	Failed      uint64 // the connection failed before the message ended (peer reset, peer timeout)
	RefusedPeer uint64 // reset on arrival: the peer had MaxPendingPerPeer messages pending
	Pending     uint64 // gauge: messages read ahead now (partial or waiting for RecvMessage)
}

// messageCounters are a Stack's MessageStats, updated by its listeners.
type messageCounters struct {
	received, tooLarge, timedOut, failed, refusedPeer atomic.Uint64
	pending                                           atomic.Int64
}

func (m *messageCounters) snapshot() MessageStats {
	return MessageStats{
		Received: m.received.Load(), TooLarge: m.tooLarge.Load(), TimedOut: m.timedOut.Load(),
		Failed: m.failed.Load(), RefusedPeer: m.refusedPeer.Load(), Pending: uint64(max(m.pending.Load(), 0)),
	}
}

// msgServer is a Listener's message server, started by the first
// RecvMessage.
type msgServer struct {
	l   *Listener
	cfg MessageConfig
	cnt *messageCounters

	slots   chan struct{} // a send takes a pending slot (capacity MaxPending)
	ready   chan *Message // complete messages (capacity MaxPending: never blocks)
	closing chan struct{} // closed by close
	done    chan struct{} // closed when the accept loop ended; err says why
	err     error

	mu      sync.Mutex
	closed  bool
	perPeer map[netip.Addr]int
	partial map[*Conn]struct{} // being read, reset by close
	wg      sync.WaitGroup     // readers
}

func newMsgServer(l *Listener, cfg MessageConfig) *msgServer {
	m := &msgServer{
		l: l, cfg: cfg, cnt: l.msgCnt,
		slots:   make(chan struct{}, cfg.MaxPending),
		ready:   make(chan *Message, cfg.MaxPending),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		perPeer: make(map[netip.Addr]int),
		partial: make(map[*Conn]struct{}),
	}
	go m.acceptLoop()
	return m
}

// acceptLoop accepts connections while a slot is free and starts a reader
// for each. It ends when accept fails: the listener or the stack was
// closed, or the daemon is gone (no backend has another accept error).
func (m *msgServer) acceptLoop() {
	defer close(m.done)
	for {
		select {
		case m.slots <- struct{}{}: // freed by a reader's failure or by RecvMessage
		case <-m.closing:
			m.err = &net.OpError{Op: "accept", Net: "ndp", Addr: m.l.local, Err: net.ErrClosed}
			return
		}
		bc, err := m.l.b.accept(nil)
		if err != nil {
			<-m.slots
			m.err = &net.OpError{Op: "accept", Net: "ndp", Addr: m.l.local, Err: err}
			return
		}
		c := newConn(bc, Addr{IP: m.l.local.IP, Port: m.l.b.port()})
		peer := c.remote.IP
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			c.Abort()
			<-m.slots
			continue
		}
		if m.perPeer[peer] >= m.cfg.MaxPendingPerPeer {
			m.mu.Unlock()
			c.Abort()
			m.cnt.refusedPeer.Add(1)
			<-m.slots
			continue
		}
		m.perPeer[peer]++
		m.partial[c] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		m.cnt.pending.Add(1)
		go m.read(c)
	}
}

// read reads c's message to its end within ReadTimeout and MaxSize and
// queues it, or resets c and frees its slot.
func (m *msgServer) read(c *Conn) {
	defer m.wg.Done()
	c.SetReadDeadline(time.Now().Add(m.cfg.ReadTimeout))
	data, err := readAllLimit(c, m.cfg.MaxSize)
	c.SetReadDeadline(time.Time{})
	m.mu.Lock()
	delete(m.partial, c)
	if m.perPeer[c.remote.IP]--; m.perPeer[c.remote.IP] <= 0 {
		delete(m.perPeer, c.remote.IP)
	}
	closed := m.closed
	m.mu.Unlock()
	if err == nil && !closed {
		m.ready <- &Message{Data: data, From: c.remote, c: c}
		return
	}
	switch {
	case closed:
	case errors.Is(err, ErrMessageTooLarge):
		m.cnt.tooLarge.Add(1)
		c.b.abortTooLarge()
	case errors.Is(err, os.ErrDeadlineExceeded):
		m.cnt.timedOut.Add(1)
	default:
		m.cnt.failed.Add(1)
	}
	c.Abort()
	m.cnt.pending.Add(-1)
	<-m.slots
}

// readAllLimit reads c to EOF; more than limit bytes is ErrMessageTooLarge.
// The buffer grows with what arrives (a stalled 100-byte message holds a
// few hundred bytes, not limit).
func readAllLimit(c *Conn, limit int) ([]byte, error) {
	b := make([]byte, 0, min(limit+1, 512))
	for {
		if len(b) == cap(b) { // len(b) <= limit, so the new cap is larger
			nb := make([]byte, len(b), min(2*cap(b), limit+1))
			copy(nb, b)
			b = nb
		}
		n, err := c.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return nil, ErrMessageTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// next returns the next complete message; cancel is the listener's
// deadline.
func (m *msgServer) next(cancel <-chan struct{}) (*Message, error) {
	select {
	case msg := <-m.ready:
		return m.handOut(msg), nil
	default:
	}
	select {
	case msg := <-m.ready:
		return m.handOut(msg), nil
	case <-m.done:
		// Messages completed before the listener ended are still given.
		select {
		case msg := <-m.ready:
			return m.handOut(msg), nil
		default:
		}
		return nil, m.err
	case <-cancel:
		return nil, &net.OpError{Op: "accept", Net: "ndp", Addr: m.l.local, Err: os.ErrDeadlineExceeded}
	}
}

func (m *msgServer) handOut(msg *Message) *Message {
	m.cnt.pending.Add(-1)
	m.cnt.received.Add(1)
	<-m.slots
	return msg
}

// close resets every partial and every complete message not yet handed
// out, after the backend listener was closed (the accept loop ends).
func (m *msgServer) close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	close(m.closing)
	for c := range m.partial {
		c.Abort() // the reader's Read returns net.ErrClosed
	}
	m.mu.Unlock()
	m.wg.Wait()
	<-m.done
	for {
		select {
		case msg := <-m.ready:
			msg.c.Abort()
			m.cnt.pending.Add(-1)
		default:
			return
		}
	}
}

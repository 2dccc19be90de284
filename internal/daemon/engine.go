package daemon

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
)

// EngineTransport adapts an internal/engine.Stack to the Transport the core
// drives. The Stack must be built with NoBackground (the core loop is its
// only poller) and OnEvent set to this adapter's OnEvent:
//
//	t := daemon.NewEngineTransport(daemon.EngineTransportConfig{})
//	cfg.NoBackground, cfg.OnEvent = true, t.OnEvent
//	st, err := engine.New(cfg)
//	t.Bind(st, xskFD)
//
// The engine's Conn calls block; the adapter calls them with an
// already-closed cancel channel, which makes them return at once with
// os.ErrDeadlineExceeded when they would wait (after writing what fits /
// finding nothing to read), and maps that to the Transport's "not now".
// Every call happens on the core goroutine, so OnEvent (run by the Stack
// under its lock, inside those calls) appends to a queue only that
// goroutine touches.
type EngineTransport struct {
	cfg       EngineTransportConfig
	st        *engine.Stack
	waitFD    int
	conns     map[ConnID]*engine.Conn
	listeners map[uint16]*engine.Listener
	pending   []engineEvent
	now       chan struct{} // closed: "do not wait"
	lastWork  time.Time     // last Poll that did something
}

// EngineTransportConfig tunes the adapter. The zero value is valid.
type EngineTransportConfig struct {
	// DialTimeout bounds the neighbour resolution of a Dial to an address
	// not in the Stack's cache (the core loop waits for it). Default 1s.
	DialTimeout time.Duration
	// BusyPollTimeout is how long the core may sleep while connections are
	// open and the stack did work in the last IdleAfter: the engine does not
	// export its next timer or pull release time, and a paced PULL released
	// late delays the data it elicits. Default 200us: 20us was measured
	// worse on the 2-vCPU VM (the extra wakeups steal the CPU the peer
	// needs; docs/BENCHMARKS.md).
	BusyPollTimeout time.Duration
	// IdleTimeout is how long the core may sleep while connections are open
	// but the stack has been idle for IdleAfter (RTO granularity). Default 1ms.
	IdleTimeout time.Duration
	// IdleAfter: see above. Default 1ms.
	IdleAfter time.Duration
	// Backlog is the engine listener backlog per port. Default 1024.
	Backlog int
}

type engineEvent struct {
	c    *engine.Conn
	kind ndp.EventKind
}

// NewEngineTransport returns an adapter to Bind to a Stack.
func NewEngineTransport(cfg EngineTransportConfig) *EngineTransport {
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.BusyPollTimeout == 0 {
		cfg.BusyPollTimeout = 200 * time.Microsecond
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = time.Millisecond
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = time.Millisecond
	}
	if cfg.Backlog == 0 {
		cfg.Backlog = 1024
	}
	now := make(chan struct{})
	close(now)
	return &EngineTransport{
		cfg: cfg, waitFD: -1, now: now,
		conns:     make(map[ConnID]*engine.Conn),
		listeners: make(map[uint16]*engine.Listener),
		pending:   make([]engineEvent, 0, 1024),
	}
}

// Bind attaches the Stack; waitFD is the link's descriptor to sleep on (the
// XSK fd), or -1.
func (t *EngineTransport) Bind(st *engine.Stack, waitFD int) {
	t.st, t.waitFD = st, waitFD
}

// OnEvent is the Stack's Config.OnEvent hook.
func (t *EngineTransport) OnEvent(c *engine.Conn, kind ndp.EventKind) {
	switch kind {
	case ndp.EventAccepted, ndp.EventReadable, ndp.EventWritable, ndp.EventClosed:
		t.pending = append(t.pending, engineEvent{c, kind})
	}
}

func (t *EngineTransport) Listen(port uint16) error {
	l, err := t.st.Listen(port, t.cfg.Backlog)
	if err != nil {
		return err
	}
	t.listeners[port] = l
	return nil
}

func (t *EngineTransport) Unlisten(port uint16) {
	if l := t.listeners[port]; l != nil {
		l.Close()
		delete(t.listeners, port)
	}
}

func (t *EngineTransport) Dial(remote netip.AddrPort, opts DialOptions) (ConnID, error) {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.DialTimeout)
	defer cancel()
	o := ndp.DialOptions{Size: opts.Size, Priority: opts.Priority, Paced: opts.Paced}
	if opts.Deadline > 0 {
		o.Deadline = t.st.Now() + ndp.Time(opts.Deadline)
	}
	c, err := t.st.Dial(ctx, remote.Addr().Unmap().As4(), remote.Port(), o)
	if err != nil {
		return 0, err
	}
	id := ConnID(c.Handle())
	t.conns[id] = c
	return id, nil
}

// notNow maps the engine's "would block" to the Transport's (n, nil).
func notNow(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	return err
}

func (t *EngineTransport) Write(id ConnID, p []byte) (int, error) {
	c := t.conns[id]
	if c == nil {
		return 0, ndp.ErrInvalidHandle
	}
	n, err := c.Write(p, false, t.now)
	return n, notNow(err)
}

func (t *EngineTransport) CloseWrite(id ConnID) error {
	c := t.conns[id]
	if c == nil {
		return ndp.ErrInvalidHandle
	}
	return c.CloseWrite()
}

func (t *EngineTransport) Read(id ConnID, p []byte) (int, error) {
	c := t.conns[id]
	if c == nil {
		return 0, ndp.ErrInvalidHandle
	}
	n, err := c.Read(p, t.now)
	return n, notNow(err)
}

func (t *EngineTransport) Release(id ConnID) {
	if c := t.conns[id]; c != nil {
		c.Close()
		delete(t.conns, id)
	}
}

func (t *EngineTransport) Abort(id ConnID) {
	if c := t.conns[id]; c != nil {
		c.Abort()
		delete(t.conns, id)
	}
}

func (t *EngineTransport) Poll() bool {
	if t.st.Poll() {
		t.lastWork = time.Now()
		return true
	}
	return false
}

// Events translates the queued engine events. Accepted connections are
// taken off their listener's backlog (in order; the backlog is FIFO).
func (t *EngineTransport) Events(dst []TransportEvent) int {
	n := 0
	for n < len(dst) && len(t.pending) > 0 {
		ev := t.pending[0]
		t.pending = t.pending[1:]
		if len(t.pending) == 0 {
			t.pending = t.pending[:0:cap(t.pending)]
		}
		id := ConnID(ev.c.Handle())
		switch ev.kind {
		case ndp.EventAccepted:
			l := t.listeners[ev.c.LocalPort()]
			if l == nil {
				continue
			}
			c, err := l.Accept(t.now)
			if err != nil || c != ev.c {
				if c != nil {
					c.Abort()
				}
				continue
			}
			t.conns[id] = c
			r := c.Remote()
			dst[n] = TransportEvent{Kind: TEAccepted, Conn: id, LocalPort: c.LocalPort(),
				Remote: netip.AddrPortFrom(netip.AddrFrom4(r.IP), r.Port), Priority: c.Priority}
		case ndp.EventReadable:
			dst[n] = TransportEvent{Kind: TEReadable, Conn: id}
		case ndp.EventWritable:
			dst[n] = TransportEvent{Kind: TEWritable, Conn: id}
		case ndp.EventClosed:
			dst[n] = TransportEvent{Kind: TEClosed, Conn: id, Err: ev.c.Err()}
		}
		n++
	}
	return n
}

func (t *EngineTransport) PollTimeout() time.Duration {
	if len(t.pending) > 0 {
		return 0
	}
	if len(t.conns) == 0 {
		return -1
	}
	if time.Since(t.lastWork) < t.cfg.IdleAfter {
		return t.cfg.BusyPollTimeout
	}
	return t.cfg.IdleTimeout
}

func (t *EngineTransport) WaitFD() int { return t.waitFD }

// Stack returns the bound Stack (for stats).
func (t *EngineTransport) Stack() *engine.Stack { return t.st }

package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
)

// EngineTransport adapts an internal/engine.Stack to the Transport the core
// drives. The Stack must be built with NoBackground (the core loop is its
// only poller), OnEvent set to this adapter's OnEvent and, when the adapter
// resolves neighbours itself (Config.Resolvers), Resolver set to its
// Resolver:
//
//	t := daemon.NewEngineTransport(daemon.EngineTransportConfig{Resolvers: rs})
//	cfg.NoBackground, cfg.OnEvent, cfg.Resolver = true, t.OnEvent, t.Resolver()
//	st, err := engine.New(cfg)
//	t.Bind(st, xskFD)
//
// The adapter uses the engine's calls that never wait nor poll
// (Conn.WriteQueued writes what fits, Conn.ReadBuffered reads what is
// buffered; Listener.Accept gets an already-closed cancel channel and is
// called only for a connection its EventAccepted announced), so the core
// loop's own Poll is the only batch of network work per iteration.
// Every call happens on the core goroutine, so OnEvent (run by the Stack
// under its lock, inside those calls) appends to a queue only that
// goroutine touches. A dial to a peer whose MAC the Stack has not cached
// is pending while a worker resolves it (neighbors.go).
type EngineTransport struct {
	cfg       EngineTransportConfig
	st        *engine.Stack
	waitFD    int
	neigh     *neighbors // nil: the Stack's own Resolver answers inside Dial
	conns     map[ConnID]*engine.Conn
	listeners map[uint16]*engine.Listener
	pending   []engineEvent
	now       chan struct{} // closed: "do not wait"

	// Dials waiting for a neighbour resolution (core goroutine only).
	dialing     map[ConnID]pendingDial
	resolving   map[[4]byte][]ConnID // addresses being resolved → dials waiting on each
	nextPending ConnID
	dialed      []TransportEvent // TEDialed events not yet taken by Events
}

// pendingDial is a dial waiting for its peer's MAC.
type pendingDial struct {
	ip   [4]byte
	port uint16
	opts ndp.DialOptions
}

// pendingConnBit marks the ConnIDs of pending dials. Engine handles are
// generation<<32 | index+1; the bit would collide only with a connection
// slot reused 2^31 times, and a pending ID lives for one resolution.
const pendingConnBit ConnID = 1 << 63

// EngineTransportConfig tunes the adapter. The zero value is valid.
type EngineTransportConfig struct {
	// DialTimeout bounds one neighbour resolution (ARP for a peer the
	// Stack has not cached). Default 1s. With Resolvers the core does not
	// wait for it: the dial is answered (TEDialed) when it ends, success or
	// engine.ErrNoNeighbor with the address.
	DialTimeout time.Duration
	// Resolvers are the blocking neighbour resolvers (engine.KernelResolver,
	// which is not safe for concurrent use: one each) the adapter resolves
	// with, one worker goroutine per resolver, so at most len(Resolvers)
	// resolutions run at once. The adapter owns them: they are closed when
	// the Stack closes its Resolver (t.Resolver()). Empty: the Stack's own
	// Resolver answers inside Dial on the core goroutine, so it must not
	// block (engine.StaticResolver; tests).
	Resolvers []engine.Resolver
	// ResolveQueue bounds the addresses waiting for a free resolver; a
	// dial to one more unresolved address fails at once with
	// ErrResolverBusy (backpressure). Default 64.
	ResolveQueue int
	// Backlog is the engine listener backlog per port. Default 1024.
	Backlog int
}

type engineEvent struct {
	c    *engine.Conn
	kind ndp.EventKind
}

// NewEngineTransport returns an adapter to Bind to a Stack. With
// cfg.Resolvers it starts their worker goroutines (stopped when the Stack
// closes its Resolver).
func NewEngineTransport(cfg EngineTransportConfig) *EngineTransport {
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.ResolveQueue == 0 {
		cfg.ResolveQueue = 64
	}
	if cfg.Backlog == 0 {
		cfg.Backlog = 1024
	}
	now := make(chan struct{})
	close(now)
	t := &EngineTransport{
		cfg: cfg, waitFD: -1, now: now,
		conns:     make(map[ConnID]*engine.Conn),
		listeners: make(map[uint16]*engine.Listener),
		pending:   make([]engineEvent, 0, 1024),
		dialing:   make(map[ConnID]pendingDial),
		resolving: make(map[[4]byte][]ConnID),
	}
	if len(cfg.Resolvers) > 0 {
		t.neigh = newNeighbors(cfg.Resolvers, cfg.ResolveQueue, cfg.DialTimeout)
	}
	return t
}

// Resolver is the non-blocking engine.Resolver to build the Stack with
// when Config.Resolvers is set (nil otherwise). Closing it (the Stack
// does, on Close) stops the workers and closes Config.Resolvers.
func (t *EngineTransport) Resolver() engine.Resolver {
	if t.neigh == nil {
		return nil
	}
	return t.neigh
}

// SetWakeup implements Transport: a finished resolution wakes the core.
func (t *EngineTransport) SetWakeup(wake func()) {
	if t.neigh != nil {
		t.neigh.setWake(wake)
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

func (t *EngineTransport) Dial(remote netip.AddrPort, opts DialOptions) (ConnID, bool, error) {
	o := ndp.DialOptions{Size: opts.Size, Priority: opts.Priority, Paced: opts.Paced}
	if opts.Deadline > 0 {
		o.Deadline = t.st.Now() + ndp.Time(opts.Deadline)
	}
	ip, port := remote.Addr().Unmap().As4(), remote.Port()
	ctx := context.Background() // t.neigh's Resolve never blocks
	if t.neigh == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.DialTimeout)
		defer cancel()
	}
	c, err := t.st.Dial(ctx, ip, port, o)
	if err == nil {
		id := ConnID(c.Handle())
		t.conns[id] = c
		return id, false, nil
	}
	if t.neigh == nil || !errors.Is(err, errNeedResolve) {
		return 0, false, err
	}
	// Not cached: resolve in the background (one resolution per address,
	// however many dials wait for it).
	waiting, inFlight := t.resolving[ip]
	if !inFlight && !t.neigh.start(ip) {
		return 0, false, fmt.Errorf("%w (%d waiting): %v", ErrResolverBusy, len(t.resolving), remote.Addr())
	}
	t.nextPending++
	id := pendingConnBit | t.nextPending
	t.resolving[ip] = append(waiting, id)
	t.dialing[id] = pendingDial{ip: ip, port: port, opts: o}
	return id, true, nil
}

// finishResolutions turns finished resolutions into TEDialed events: the
// dials waiting on each address are made now (the Stack takes the MAC from
// the hand-off and caches it), or fail with the resolution's error.
func (t *EngineTransport) finishResolutions() {
	for {
		var r neighborResult
		select {
		case r = <-t.neigh.results:
		default:
			return
		}
		ids := t.resolving[r.ip]
		delete(t.resolving, r.ip)
		if r.err == nil {
			t.neigh.handOff(r.ip, r.mac)
		}
		for _, id := range ids {
			pd, ok := t.dialing[id]
			if !ok {
				continue // aborted while it waited
			}
			delete(t.dialing, id)
			ev := TransportEvent{Kind: TEDialed, Conn: id, Err: r.err}
			if r.err == nil {
				c, err := t.st.Dial(context.Background(), pd.ip, pd.port, pd.opts)
				if err != nil {
					ev.Err = err
				} else {
					ev.Dialed = ConnID(c.Handle())
					t.conns[ev.Dialed] = c
				}
			}
			t.dialed = append(t.dialed, ev)
		}
		t.neigh.clearHandOff()
	}
}

func (t *EngineTransport) Write(id ConnID, p []byte, fin bool) (int, error) {
	c := t.conns[id]
	if c == nil {
		return 0, ndp.ErrInvalidHandle
	}
	// Queued, not sent: the core loop writes each application frame in
	// turn and its next Poll sends them all as full packets in one batch.
	return c.WriteQueued(p, fin)
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
	// Only what is buffered: the core loop's own Poll receives, so a read
	// polling the Stack again (Conn.Read does when it finds nothing, and
	// after each read while PULLs are queued) would add a batch of network
	// work, and often a transmit kick, per frame read.
	return c.ReadBuffered(p)
}

// cancelDial cancels the pending dial id (Abort or Release of its ID):
// still waiting for its resolution, or already made with its TEDialed not
// yet taken by Events (finishResolutions makes every dial of a result at
// once, Events hands out at most len(dst)): that connection is aborted
// (nothing was sent on it) and its TEDialed dropped, or it would stay open
// in the Stack with nobody to release it. False: id is no pending dial.
func (t *EngineTransport) cancelDial(id ConnID) bool {
	if id&pendingConnBit == 0 {
		return false
	}
	if _, ok := t.dialing[id]; ok {
		delete(t.dialing, id) // nothing was sent: cancelling is all there is
		return true
	}
	for i := range t.dialed {
		if t.dialed[i].Conn != id {
			continue
		}
		if c := t.conns[t.dialed[i].Dialed]; c != nil && t.dialed[i].Err == nil {
			c.Abort()
			delete(t.conns, t.dialed[i].Dialed)
		}
		t.dialed = append(t.dialed[:i], t.dialed[i+1:]...)
		return true
	}
	return false
}

func (t *EngineTransport) Release(id ConnID) {
	if t.cancelDial(id) {
		return
	}
	if c := t.conns[id]; c != nil {
		c.Close()
		delete(t.conns, id)
	}
}

func (t *EngineTransport) Abort(id ConnID, code ndp.ResetCode) {
	if t.cancelDial(id) {
		return
	}
	if c := t.conns[id]; c != nil {
		c.AbortCode(code)
		delete(t.conns, id)
	}
}

func (t *EngineTransport) Poll(deferTx, spun bool) bool {
	return t.st.PollLoop(deferTx, spun)
}

// Events translates the queued engine events. Accepted connections are
// taken off their listener's backlog (in order; the backlog is FIFO).
func (t *EngineTransport) Events(dst []TransportEvent) int {
	if t.neigh != nil && len(t.neigh.results) > 0 {
		t.finishResolutions()
	}
	n := 0
	for n < len(dst) && len(t.dialed) > 0 {
		dst[n] = t.dialed[0]
		t.dialed = t.dialed[:copy(t.dialed, t.dialed[1:])]
		n++
	}
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

// PollTimeout is the time until the Stack's next deadline (timer, paced
// PULL, pacer retry: engine.Stack.NextDeadline), 0 with events or
// resolutions waiting, -1 when only input can make work.
func (t *EngineTransport) PollTimeout() time.Duration {
	if len(t.pending) > 0 || len(t.dialed) > 0 || (t.neigh != nil && len(t.neigh.results) > 0) {
		return 0
	}
	at, ok := t.st.NextDeadline()
	if !ok {
		return -1
	}
	return time.Duration(max(at-t.st.Now(), 0))
}

func (t *EngineTransport) WaitFD() int { return t.waitFD }

// Stack returns the bound Stack (for stats).
func (t *EngineTransport) Stack() *engine.Stack { return t.st }

// EngineStats is the engine stack's counters (ndpd status reports them).
func (t *EngineTransport) EngineStats() engine.Stats { return t.st.Stats() }

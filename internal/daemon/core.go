package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/ring"
)

// Config configures a Core. The zero value of every field selects the
// documented default; NewCore fills defaults and validates.
type Config struct {
	// Pool is the shared buffer area the applications map: Frames (default
	// 8192) of FrameSize bytes (default 2048), DaemonFrames for RX (default
	// Frames/2), and one TX partition of AppFrames (default 256) per attached
	// application (so at most (Frames-DaemonFrames)/AppFrames applications).
	Pool ring.PoolConfig
	// Region sizes each application's region (socket slots and ring sizes);
	// see ring.RegionConfig. Default Sockets is 64 (32 dial + 32 accept slots).
	Region ring.RegionConfig
	// SpinFor is how long the core keeps polling after its last useful work
	// before it sleeps (adaptive polling). Between idle polls it yields the
	// CPU (sched_yield), so on a machine with more busy threads than cores
	// (2 vCPUs running two daemons and their applications) the spin does
	// not take the CPU from the thread that has work (measurements in
	// docs/decisions.md, ndpd). Default 50us; negative = never spin.
	// The window adapts (adaptSpin): it doubles, up to MaxSpinFor, while
	// sleeps are cut short by input within it, and halves back to SpinFor
	// once sleeps run long.
	SpinFor time.Duration
	// MaxSpinFor bounds the adaptive spin window. Default 1ms (at least
	// SpinFor).
	MaxSpinFor time.Duration
	// MaxSleep bounds one sleep. Default 10ms.
	MaxSleep time.Duration
	// DrainTimeout bounds the graceful drain (Drain): open connections get
	// this long to finish before the core stops anyway. Default 5s.
	DrainTimeout time.Duration
	// MaxLentPerApp bounds the daemon (RX) frames one application may hold
	// unreleased, so a slow or stuck reader cannot starve the others: past
	// it, its received bytes wait in the transport (flow control). Default
	// a quarter of the daemon partition.
	MaxLentPerApp uint32
	// MaxListensPerApp bounds the ports one application listens on.
	// Default 64.
	MaxListensPerApp int
	// LocalAddr is the transport's IPv4 address, told to every attaching
	// application (informational; the zero value is reported as unknown).
	LocalAddr netip.Addr
	// Queue is the interface queue this core serves (reported in Status
	// and logs; informational).
	Queue int
	// Logger receives setup, teardown and rare events (never per packet).
	// nil = no logs.
	Logger *zap.Logger
}

func (c *Config) populate() {
	if c.Pool.Frames == 0 {
		c.Pool.Frames = 8192
	}
	if c.Pool.FrameSize == 0 {
		c.Pool.FrameSize = 2048
	}
	if c.Region.Sockets == 0 {
		c.Region.Sockets = 64
	}
	if c.SpinFor == 0 {
		c.SpinFor = 50 * time.Microsecond
	}
	if c.MaxSpinFor == 0 {
		c.MaxSpinFor = time.Millisecond
	}
	c.MaxSpinFor = max(c.MaxSpinFor, c.SpinFor)
	if c.MaxSleep == 0 {
		c.MaxSleep = 10 * time.Millisecond
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 5 * time.Second
	}
	if c.MaxListensPerApp == 0 {
		c.MaxListensPerApp = 64
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

func (c *Config) validate() error {
	switch {
	case c.Region.Sockets < 2:
		return fmt.Errorf("%w: Region.Sockets %d < 2 (one dial and one accept slot)", ring.ErrBadConfig, c.Region.Sockets)
	case c.MaxSleep < 0 || c.DrainTimeout < 0:
		return fmt.Errorf("%w: negative MaxSleep or DrainTimeout", ring.ErrBadConfig)
	}
	return nil
}

// CoreStats counts the core loop's own events (read through Status).
type CoreStats struct {
	Loops           uint64        // loop iterations
	Sleeps          uint64        // times the core went to sleep
	SpinWindow      time.Duration // current adaptive spin window (Config.SpinFor..MaxSpinFor)
	RXPoolEmpty     uint64        // RX delivery deferred: daemon partition exhausted
	AcceptsUnrouted uint64        // inbound connections for a port nobody listens on
	AppsAttached    uint64        // applications attached since start
	AppsReclaimed   uint64        // applications whose resources were reclaimed
	DialsDeferred   uint64        // dials that waited for a neighbour resolution (off the core loop)
	DialsUnresolved uint64        // deferred dials that failed (resolution failed or timed out)
}

type connRef struct {
	s    *session
	slot int
}

// Core is the daemon's engine room: one goroutine (Run) owns the buffer
// pool, every attached application's rings and the transport. Other
// goroutines (the control socket) talk to it only through requests
// (Attach, Detach, Status, Drain), which wake it through a doorbell.
type Core struct {
	cfg  Config
	log  *zap.Logger
	tr   Transport
	pool *ring.Pool
	buf  *ring.BufferArea

	sessions  []*session
	byApp     map[ring.AppID]*session
	listeners map[uint16]*session
	conns     map[ConnID]connRef

	reqs     chan request
	doorbell int // eventfd: requests wake a sleeping core
	// dbMu guards doorbell against ring-after-close: it is rung from other
	// goroutines (call, the transport's resolution workers) that may still
	// run after Run closed it, when its number may already be another file's.
	dbMu     sync.RWMutex
	dbClosed bool
	stopped  chan struct{}
	quit     chan struct{} // closed by Stop
	stopOnce sync.Once
	running  atomic.Bool
	// beat is when the loop last started an iteration (unix ns; 0 before
	// Run): Stalled reads it from other goroutines.
	beat atomic.Int64

	draining   bool
	drainUntil time.Time
	started    time.Time
	stats      CoreStats
	spin       time.Duration // current spin window (adaptSpin)
	// writerWakeBatch is how many returned frames wake a writer waiting
	// for them (flushCompletions): half a socket's in-flight cap.
	writerWakeBatch uint32

	cmdBuf   [64]ring.Desc
	txBuf    [64]ring.Desc
	relBuf   [256]ring.Desc
	rxBuf    [64]ring.Desc
	rxFrames [64]uint32
	complBuf [256]ring.Desc
	evBuf    [64]TransportEvent
	waiter   multiWaiter
}

// NewCore builds a core over tr: the shared buffer area (a sealed memfd
// every application maps) and its pool.
func NewCore(cfg Config, tr Transport) (*Core, error) {
	cfg.populate()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pool, err := ring.NewPool(cfg.Pool)
	if err != nil {
		return nil, err
	}
	pc := pool.Config()
	if cfg.MaxLentPerApp == 0 {
		cfg.MaxLentPerApp = max(pc.DaemonFrames/4, 1)
	}
	buf, err := ring.NewBufferArea(pc.Frames, pc.FrameSize)
	if err != nil {
		return nil, err
	}
	db, err := newDoorbell()
	if err != nil {
		buf.Close()
		return nil, err
	}
	c := &Core{
		cfg: cfg, log: cfg.Logger, tr: tr, pool: pool, buf: buf,
		writerWakeBatch: socketInflightCap(pc.AppFrames) / 2,
		byApp:           make(map[ring.AppID]*session),
		listeners:       make(map[uint16]*session),
		conns:           make(map[ConnID]connRef),
		reqs:            make(chan request, 64),
		doorbell:        db,
		stopped:         make(chan struct{}),
		quit:            make(chan struct{}),
	}
	tr.SetWakeup(c.wake)
	return c, nil
}

// wake rings the doorbell (any goroutine); a no-op once Run closed it.
func (c *Core) wake() {
	c.dbMu.RLock()
	if !c.dbClosed {
		ringDoorbell(c.doorbell)
	}
	c.dbMu.RUnlock()
}

// BufferFD is the shared buffer area's memfd (sent in every Attachment).
func (c *Core) BufferFD() int { return c.buf.FD() }

// LocalAddr is Config.LocalAddr.
func (c *Core) LocalAddr() netip.Addr { return c.cfg.LocalAddr }

func (c *Core) bind(conn ConnID, s *session, slot int) { c.conns[conn] = connRef{s, slot} }
func (c *Core) unbind(conn ConnID)                     { delete(c.conns, conn) }

// request is a message from another goroutine to the core.
type request struct {
	kind    reqKind
	peer    PeerCred
	app     ring.AppID
	onDeath func() // attach: close the app's control connection
	reply   chan reply
}

type reqKind uint8

const (
	reqAttach reqKind = iota + 1
	reqDetach
	reqStatus
	reqMetrics
	reqDrain
)

type reply struct {
	att    ring.Attachment
	app    ring.AppID
	status Snapshot
	err    error
}

// ErrStopped: the core is not running (it stopped, or never started).
var ErrStopped = errors.New("ndpd: core stopped")

func (c *Core) call(r request) (reply, error) {
	r.reply = make(chan reply, 1)
	select {
	case c.reqs <- r:
	case <-c.stopped:
		return reply{}, ErrStopped
	case <-c.quit:
		return reply{}, ErrStopped
	}
	c.wake()
	select {
	case rep := <-r.reply:
		return rep, rep.err
	case <-c.stopped:
		return reply{}, ErrStopped
	case <-c.quit: // a stuck loop never answers: Stop bounds the wait
		return reply{}, ErrStopped
	}
}

// Stop makes Run return at its next iteration without draining: it aborts
// every connection and reclaims every application (whose control
// connections close: ErrDaemonGone). Requests from then on fail with
// ErrStopped at once, even while a stuck loop never gets to its next
// iteration. Safe from any goroutine; idempotent.
func (c *Core) Stop() {
	c.stopOnce.Do(func() {
		close(c.quit)
		c.wake()
	})
}

// Attach registers a new application (from the control socket, after its
// credentials were checked): a partition of the pool and a region. The
// caller sends the returned attachment (duplicated descriptors, which the
// caller closes after sending) to the application. onDeath
// is called (from the core goroutine) if the core drops the application
// on its own (a corrupt ring, shutdown): it must close the control
// connection.
func (c *Core) Attach(peer PeerCred, onDeath func()) (ring.AppID, ring.Attachment, error) {
	rep, err := c.call(request{kind: reqAttach, peer: peer, onDeath: onDeath})
	return rep.app, rep.att, err
}

// Detach reclaims everything of app (its control connection closed: it
// exited or died): its connections are aborted, its frames and partition
// return to the pool, its region is unmapped.
func (c *Core) Detach(app ring.AppID) error {
	_, err := c.call(request{kind: reqDetach, app: app})
	return err
}

// Status returns a snapshot of the core (pool accounting, applications,
// counters).
func (c *Core) Status() (Snapshot, error) {
	rep, err := c.call(request{kind: reqStatus})
	return rep.status, err
}

// Metrics is Status without the pool audit (PoolAudit is ""): what a
// metrics scrape reads. The core builds it between two batches of its
// loop; the cost is a copy of the counters and a look at every ring.
func (c *Core) Metrics() (Snapshot, error) {
	rep, err := c.call(request{kind: reqMetrics})
	return rep.status, err
}

// Drain stops taking new applications, connections and listeners; Run
// returns once every application slot is closed or DrainTimeout passed.
func (c *Core) Drain() error {
	_, err := c.call(request{kind: reqDrain})
	return err
}

// Stopped is closed when Run returns.
func (c *Core) Stopped() <-chan struct{} { return c.stopped }

// Stalled reports whether Run is running but has not started a loop
// iteration for longer than after (at now): a loop that polls or sleeps
// starts one at least every MaxSleep, so a longer gap means something in the
// loop blocks (a stuck transport, a deadlock). Safe from any goroutine.
func (c *Core) Stalled(now time.Time, after time.Duration) bool {
	b := c.beat.Load()
	if b == 0 {
		return false
	}
	select {
	case <-c.stopped:
		return false
	default:
	}
	return now.Sub(time.Unix(0, b)) > after
}

// Queue is Config.Queue.
func (c *Core) Queue() int { return c.cfg.Queue }

func (c *Core) handle(r request, now time.Time) {
	var rep reply
	switch r.kind {
	case reqAttach:
		rep.app, rep.att, rep.err = c.attach(r.peer, r.onDeath, now)
	case reqDetach:
		if s := c.byApp[r.app]; s != nil {
			c.reclaim(s, "control connection closed")
		}
	case reqStatus:
		rep.status = c.status(now, true)
	case reqMetrics:
		rep.status = c.status(now, false)
	case reqDrain:
		if !c.draining {
			c.draining = true
			c.drainUntil = now.Add(c.cfg.DrainTimeout)
			for port, s := range c.listeners {
				c.unlisten(s, port)
			}
			c.log.Info("draining", zap.Duration("timeout", c.cfg.DrainTimeout), zap.Int("open_sockets", c.openSockets()))
		}
	}
	r.reply <- rep
}

func (c *Core) attach(peer PeerCred, onDeath func(), now time.Time) (ring.AppID, ring.Attachment, error) {
	var att ring.Attachment
	if c.draining {
		return 0, att, ErrDraining
	}
	app, part, err := c.pool.AttachApp()
	if err != nil {
		return 0, att, err
	}
	pc := c.pool.Config()
	region, err := ring.CreateRegion(c.cfg.Region, app, ring.BufferGeometry{FrameSize: pc.FrameSize, Frames: pc.Frames, Part: part})
	if err != nil {
		c.pool.Reclaim(app)
		return 0, att, err
	}
	end, err := region.DaemonEnd()
	var flag sleepFlag
	if err == nil {
		flag, err = mapSleepFlag(region.FD())
	}
	if err == nil {
		att, err = dupAttachment(region.Attachment(c.buf.FD()))
	}
	if err != nil {
		flag.unmap()
		region.Close()
		c.pool.Reclaim(app)
		return 0, att, err
	}
	s := newSession(app, region, end, peer, now)
	s.sleep = flag
	s.wakeFD = region.Attachment(-1).WakeDaemon
	s.onDeath = onDeath
	c.sessions = append(c.sessions, s)
	c.byApp[app] = s
	c.stats.AppsAttached++
	c.log.Info("application attached", zap.Uint32("app", uint32(app)), zap.Int32("pid", peer.PID), zap.Uint32("uid", peer.UID), zap.Uint32("gid", peer.GID))
	return app, att, nil
}

// killSession drops an application that broke the ring protocol.
func (c *Core) killSession(s *session, err error) {
	c.log.Warn("dropping application", zap.Uint32("app", uint32(s.app)), zap.Error(err))
	c.reclaim(s, err.Error())
}

// reclaim aborts every connection of s, returns its frames and partition to
// the pool and unmaps its region. Afterwards pool.Stats() is as if s never
// attached.
func (c *Core) reclaim(s *session, why string) {
	if s.dead {
		return
	}
	s.dead = true
	for slot := range s.socks {
		so := &s.socks[slot]
		if so.state == sockBound || so.state == sockDialing {
			c.unbind(so.conn)
			c.tr.Abort(so.conn, ndp.ResetAbort) // a pending dial: cancelled
		}
		if so.headChecked {
			s.completed = append(s.completed, so.headFrame)
			s.complSlot = append(s.complSlot, uint32(slot))
		}
	}
	// Frames the daemon held in flight go back to the partition (the app is
	// gone, nobody reads the completion ring).
	if len(s.completed) > 0 {
		c.pool.CompleteTX(s.app, s.completed)
		s.completed, s.complSlot = s.completed[:0], s.complSlot[:0]
	}
	for _, port := range append([]uint16(nil), s.ports...) {
		c.unlisten(s, port)
	}
	for i := range s.acceptQ {
		c.tr.Abort(s.acceptQ[i].Conn, ndp.ResetAbort)
	}
	s.acceptQ = s.acceptQ[:0]
	rep, err := c.pool.Reclaim(s.app)
	s.sleep.unmap()
	s.region.Close()
	delete(c.byApp, s.app)
	for i, x := range c.sessions {
		if x == s {
			c.sessions = append(c.sessions[:i], c.sessions[i+1:]...)
			break
		}
	}
	c.stats.AppsReclaimed++
	fields := []zap.Field{zap.Uint32("app", uint32(s.app)), zap.Int32("pid", s.peer.PID), zap.String("why", why),
		zap.Uint32("lent", rep.Lent), zap.Uint32("app_owned", rep.AppOwned), zap.Uint32("in_flight", rep.InFlight)}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	if aerr := c.pool.Audit(); aerr != nil {
		fields = append(fields, zap.NamedError("audit", aerr))
		c.log.Error("application reclaimed, pool audit failed", fields...)
	} else {
		c.log.Info("application reclaimed", fields...)
	}
	if s.onDeath != nil {
		s.onDeath()
	}
}

func (c *Core) openSockets() int {
	n := 0
	for _, s := range c.sessions {
		for i := range s.socks {
			if s.socks[i].state != sockFree {
				n++
			}
		}
	}
	return n
}

// Run is the core loop. It runs on the calling goroutine until Drain
// finishes (or Stop), then aborts what is left, reclaims every application
// and returns. Adaptive polling: after SpinFor without work it sleeps on
// every application's doorbell, the request doorbell and the transport's
// descriptor, at most until the transport's next timer.
//
// One iteration: the applications' commands and data (written to the
// transport), one transport Poll (receive, and transmit what was written),
// connection events, then what each application gets (data, ends,
// accepts) and its wakeup. An iteration that woke an application yields
// the CPU once (handoff), and its Poll, when the applications gave it
// nothing to send, deferred the ACKs of what it received: on two CPUs the
// application shares its CPU with this loop, so it runs with its bytes
// before the ACK's transmit kick is paid, and the ACK leaves with its
// answer in one kick (docs/latency.md, "Through ndpd").
func (c *Core) Run() error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("ndpd: core already running")
	}
	defer close(c.stopped)
	defer c.shutdown()
	c.started = time.Now()
	lastWork := c.started
	c.spin = max(c.cfg.SpinFor, 0)
	c.stats.SpinWindow = c.spin
	deferred := false // the last poll deferred transmits
	spun := false     // the loop came round again without sleeping since its last poll
	for {
		now := time.Now()
		c.beat.Store(now.UnixNano())
		work := false
		select {
		case r := <-c.reqs:
			c.handle(r, now)
			work = true
		case <-c.quit:
			c.log.Warn("core loop stopped", zap.Int("queue", c.cfg.Queue), zap.Int("open_sockets", c.openSockets()))
			return nil
		default:
		}
		if c.draining && (c.openSockets() == 0 || now.After(c.drainUntil)) {
			c.log.Info("drain finished", zap.Int("open_sockets", c.openSockets()))
			return nil
		}
		// The applications' commands and data first, so that what they
		// wrote leaves in this iteration's transmit batch.
		fromApps := false
		for i := 0; i < len(c.sessions); i++ {
			s := c.sessions[i]
			w := c.pollInput(s)
			if s.dead {
				i--
				continue
			}
			fromApps = fromApps || w
		}
		work = work || fromApps
		// A poll with nothing from the applications to send defers the
		// ACKs its input produces (handoff, below); never twice in a row,
		// so a core under steady input still sends them within one
		// iteration.
		deferTx := !fromApps && !deferred
		deferred = false
		if c.tr.Poll(deferTx, spun) {
			work = true
			deferred = deferTx
		}
		spun = true
		if c.transportEvents() {
			work = true
		}
		woken := false
		for i := 0; i < len(c.sessions); i++ {
			s := c.sessions[i]
			w := c.pollOutput(s)
			if s.dead {
				i--
				continue
			}
			if s.wake != 0 {
				if woke, _ := s.end.Notifier.NotifyMask(s.wake.mask()); woke {
					s.counters.AppWakeups++
					woken = true
				}
				s.wake = 0
			}
			work = work || w
		}
		c.stats.Loops++
		if work {
			lastWork = now
			if woken {
				// Handoff: an application this core just woke runs now, if
				// it shares this CPU, with what it was given, before the
				// next poll sends the deferred ACKs (with its answer, in one
				// kick). Elsewhere the yield returns at once. Only after a
				// wakeup: a busy application (a bulk reader) is fed every
				// iteration, and a yield each time would hand the CPU to any
				// other runnable process as often.
				yieldCPU()
			}
			continue
		}
		if c.spin > 0 && now.Sub(lastWork) < c.spin {
			// Spin politely: give the CPU to any runnable thread (an
			// application, the peer daemon, a softirq) before polling again.
			yieldCPU()
			continue
		}
		c.stats.Sleeps++
		spun = false
		input := c.sleep()
		lastWork = time.Now()
		c.adaptSpin(lastWork.Sub(now), input)
	}
}

// adaptSpin tunes the spin window from how a sleep went (engine.Stack's
// rule). A sleep cut short by input within the window means the other side
// (an application, the peer daemon) was only a little slower than the
// window, and every exchange paid a wakeup of this core: on two CPUs shared
// with other work that wakeup waits for the CPU (tens to hundreds of µs),
// and an RPC through two daemons put one or two on its critical path. The
// window doubles, up to MaxSpinFor. A sleep that ran to its timeout or well
// past the window means the core is idle: the window halves back toward
// SpinFor, so an idle core spins SpinFor per wakeup again.
func (c *Core) adaptSpin(slept time.Duration, input bool) {
	if c.spin <= 0 || c.cfg.SpinFor >= c.cfg.MaxSpinFor {
		return
	}
	switch {
	case input && slept < c.spin:
		c.spin = min(2*c.spin, c.cfg.MaxSpinFor)
	case !input || slept > 8*c.spin:
		c.spin = max(c.spin/2, c.cfg.SpinFor)
	}
	c.stats.SpinWindow = c.spin
}

// pollSession runs one batch of every ring of s.
func (c *Core) pollSession(s *session) bool {
	w := c.pollInput(s)
	if s.dead {
		return true
	}
	return c.pollOutput(s) || w
}

// pollInput takes what s sent: commands, released frames, data on its TX
// rings (written to the transport, sent by the Poll that follows).
func (c *Core) pollInput(s *session) bool {
	w := c.flushBacklog(s)
	w = c.pollCommands(s) || w
	if s.dead {
		return true
	}
	w = c.pollReleases(s) || w
	if s.dead {
		return true
	}
	return c.pollTX(s) || w
}

// pollOutput gives s what it gets: queued events, received data and ends,
// accepted connections.
func (c *Core) pollOutput(s *session) bool {
	w := c.flushBacklog(s)
	w = c.pollRX(s) || w
	if len(s.acceptQ) > 0 {
		w = c.retryAccepts(s) || w
	}
	return w
}

func (c *Core) flushBacklog(s *session) bool { return s.flushBacklog() }

// transportEvents dispatches the transport's connection events.
func (c *Core) transportEvents() bool {
	n := c.tr.Events(c.evBuf[:])
	for i := 0; i < n; i++ {
		ev := &c.evBuf[i]
		if ev.Kind == TEAccepted {
			if c.draining {
				c.tr.Abort(ev.Conn, ndp.ResetAbort)
				continue
			}
			c.accept(ev)
			continue
		}
		ref, ok := c.conns[ev.Conn]
		if !ok {
			continue // a connection the app already let go
		}
		so := &ref.s.socks[ref.slot]
		switch ev.Kind {
		case TEReadable:
			so.readable = true
		case TEClosed:
			// Read reports the rest of the stream and the error; a blocked
			// Write is retried so that it sees the error too.
			so.readable, so.blocked = true, false
		case TEWritable:
			so.blocked = false
		case TEDialed:
			c.dialed(ref, so, ev)
		}
	}
	return n > 0
}

// dialed finishes a pending dial: the slot is bound to its connection (the
// data waiting on TX(slot) flows from the next pollTX) or failed, and the
// app gets the OpConnect's reply. A close or close-write the app sent
// meanwhile stays requested.
func (c *Core) dialed(ref connRef, so *socket, ev *TransportEvent) {
	if so.state != sockDialing {
		return
	}
	c.unbind(ev.Conn)
	st := StatusOf(ev.Err)
	if ev.Err == nil {
		so.state, so.conn = sockBound, ev.Dialed
		c.bind(ev.Dialed, ref.s, ref.slot)
	} else {
		so.state, so.conn = sockFailed, 0
		c.stats.DialsUnresolved++
		c.log.Debug("dial failed", zap.Uint32("app", uint32(ref.s.app)), zap.Int("slot", ref.slot), zap.Error(ev.Err))
	}
	ref.s.event(ring.Desc{Frame: ring.NoFrame, Conn: uint32(ref.slot), Op: ring.OpReply, Aux: uint64(st), Cookie: so.dialCookie})
	so.dialCookie = 0
}

// shutdown aborts every connection and reclaims every application.
func (c *Core) shutdown() {
	for len(c.sessions) > 0 {
		c.reclaim(c.sessions[0], "daemon stopping")
	}
	if err := c.pool.Audit(); err != nil {
		c.log.Error("pool audit at shutdown", zap.Error(err))
	}
	c.dbMu.Lock()
	c.dbClosed = true
	closeFD(c.doorbell)
	c.dbMu.Unlock()
	c.buf.Close()
}

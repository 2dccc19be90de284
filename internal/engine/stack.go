package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/capture"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
	"go.uber.org/zap"
)

// ErrStackClosed is returned by calls on a closed Stack and by waiters a
// Stack close unblocked.
var ErrStackClosed = errors.New("engine: stack closed")

// Stats are a Stack's counters (cumulative) plus its endpoint's.
type Stats struct {
	Polls          uint64 // Poll batches run
	RxFrames       uint64 // frames received from the link
	RxRejected     uint64 // frames the endpoint refused (malformed, bad checksum, unknown connection, time-wait...)
	TxFrames       uint64 // frames handed to the link
	TxBackpressure uint64 // Polls that found no transmit buffer
	TxErrors       uint64 // transmits the link failed (a broken link; logged at most once a second)
	PullsReleased  uint64 // PULLs released by the pull queue
	Quenched       uint64 // connections failed because their D3 deadline was unmeetable
	AcceptDropped  uint64 // inbound connections refused: no listener or backlog full
	Wakeups        uint64 // times the background poller slept and woke
	Endpoint       ndp.Stats
	PullQueue      pullpacer.QueueStats
	// Link is the link's own counters, when it keeps any (an AF_XDP link
	// reports its socket's; an in-memory link reports none).
	Link LinkStats
}

// LinkStats are a link's counters: what crossed it, in how many batches
// and syscalls, and what it or the kernel dropped.
type LinkStats struct {
	RxFrames, RxBatches uint64 // frames received, Receive calls that returned some
	TxFrames, TxBatches uint64 // frames sent, Transmit calls that sent some
	TxKicks             uint64 // transmit syscalls (AF_XDP: sendto)
	TxRingFull          uint64 // transmits that found the ring full (backpressure)
	RxDropped           uint64 // frames the kernel dropped: RX ring full, no fill buffer, or other
	RxFillEmpty         uint64 // times the kernel found no receive buffer posted
	InvalidDescriptors  uint64 // descriptors the kernel refused (a bug if ever non-zero)
}

// linkStatser is implemented by links that keep counters.
type linkStatser interface{ LinkStats() LinkStats }

// Stack is one NDP stack on one link (interface queue): the NDP endpoint,
// the host pull queue, the edge pacer, the neighbour cache and the
// connections. All of its state is guarded by one lock, taken once per
// Poll batch or per API call, never per packet. Any goroutine may drive it.
type Stack struct {
	cfg      Config
	link     Link
	ep       *ndp.Endpoint
	pulls    *pullpacer.PullQueue
	edge     *pullpacer.TokenBucket
	clock    func() ndp.Time
	log      *zap.Logger
	frameCap int
	// pullHorizon is how far ahead of its slot a PULL may leave:
	// PullBatch-1 pull spacings. A poll that finds one PULL due releases
	// those of the next slots with it, in one transmit kick and, per
	// connection, one PULL frame (its pull counter advanced by several);
	// the next batch waits until its own first slot, so the release times
	// keep the pacer's rate. A receiver polling every µs otherwise sends
	// one PULL per kick, and in AF_XDP copy mode each kick is a sendto
	// that also runs the peer's receive path.
	pullHorizon ndp.Time
	localIP     [4]byte
	coalesce    bool // PollBusy or NoBackground: waiters defer ACK transmission (see pollDeferLocked)

	mu          sync.Mutex
	conns       []*Conn // by Handle.Slot (connLocked)
	listeners   map[uint16]*Listener
	rx, tx      [][]byte
	neigh       map[[4]byte]neighEntry
	free        []*Conn  // released CloseAndReuse Conns, reused by newConnLocked
	pushRetry   ndp.Time // edge pacer held pushes back until then (0: none)
	txDeferred  bool     // a pollDeferLocked skipped its transmit
	kickDue     bool     // a Transmit since the lock was taken: unlock kicks the link
	txErrLogged ndp.Time // when a transmit failure was last logged
	selfPoll    bool     // the link sleeper's own last poll (no Wake for it)
	pollNow     ndp.Time // the clock reading of spinPollLocked's poll
	lastPollAt  ndp.Time // the latest poll's clock reading
	checkStall  bool     // this poll's waiter spun since its last one: a gap since lastPollAt is a stall
	signalled   bool     // this batch woke a waiter
	stats       Stats
	board       statsBoard // StatsSnapshot's copies (statsboard.go)
	closed      bool
	scratch     [4096]byte // discarded data of orphaned connections

	resolveMu sync.Mutex // serialises Resolver calls (made without mu)

	// Poller coordination (poller.go).
	spinners   atomic.Int32 // application goroutines spinning on Poll
	appPollAt  atomic.Int64 // last Poll by an application goroutine
	blocked    atomic.Int32 // application goroutines blocked on a channel
	sleeping   atomic.Bool  // a goroutine is (about to be) in Link.Wait
	linkWaiter atomic.Bool  // held by the one goroutine allowed to sleep in Link.Wait
	wakeups    atomic.Uint64
	spin       atomic.Int64         // current adaptive spin window, in [cfg.Spin, cfg.MaxSpin] (adaptSpin)
	yieldedAt  atomic.Int64         // when a waiter last yielded its P (await)
	appConns   atomic.Int32         // Conns the application holds: made and not yet closed (written under mu, or by CloseAndReuseSoon)
	lateClose  atomic.Pointer[Conn] // a CloseAndReuseSoon Conn, released by the next poll that receives nothing
	bgKick     chan struct{}
	done       chan struct{}
	bgDone     chan struct{}
}

type neighEntry struct {
	mac     [6]byte
	expires ndp.Time
}

// New builds a Stack over cfg.Link and starts its background poller (unless
// NoBackground). On error the link is not closed.
func New(cfg Config) (*Stack, error) {
	cfg.populate()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ep, err := ndp.NewEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("engine: endpoint: %w", err)
	}
	ecfg := ep.Config()
	pq, err := pullpacer.NewPullQueue(pullpacer.QueueConfig{
		LinkRate:      cfg.LinkRate,
		PullBytes:     ecfg.MTU + 14 + 24, // + FCS, preamble, inter-frame gap
		Gamma:         cfg.Gamma,
		Policy:        cfg.Policy,
		MaxBurst:      cfg.PullBurst,
		ExpectedConns: ecfg.MaxConns,
		MaxConns:      max(65536, ecfg.MaxConns),
	})
	if err != nil {
		return nil, fmt.Errorf("engine: pull queue: %w", err)
	}
	now := cfg.Clock()
	edge, err := pullpacer.NewTokenBucket(pullpacer.BucketConfig{Rate: cfg.EdgeRate, Depth: 2 * (ecfg.MTU + 14 + 24)}, now)
	if err != nil {
		return nil, fmt.Errorf("engine: edge pacer: %w", err)
	}
	s := &Stack{
		cfg: cfg, link: cfg.Link, ep: ep, pulls: pq, edge: edge, clock: cfg.Clock, log: cfg.Logger,
		frameCap:    ndp.MaxFrameLen(ecfg.MTU),
		pullHorizon: ndp.Time(cfg.PullBatch-1) * ndp.Time(pq.Config().Interval()),
		localIP:     ecfg.LocalIP,
		conns:       make([]*Conn, ecfg.MaxConns),
		listeners:   make(map[uint16]*Listener),
		rx:          make([][]byte, cfg.Batch),
		tx:          make([][]byte, cfg.Batch),
		neigh:       make(map[[4]byte]neighEntry),
		bgKick:      make(chan struct{}, 1),
		board:       statsBoard{ready: make(chan struct{}, 1)},
		done:        make(chan struct{}),
		bgDone:      make(chan struct{}),
	}
	s.cfg.Endpoint = ecfg
	s.spin.Store(int64(cfg.Spin))
	s.coalesce = cfg.Mode == PollBusy || cfg.NoBackground
	if cfg.NoBackground {
		close(s.bgDone)
	} else {
		go s.background()
	}
	s.log.Info("engine: stack up", zap.String("ip", netip.AddrFrom4(ecfg.LocalIP).String()),
		zap.Uint16("udp_port", ecfg.UDPPort), zap.Int("mtu", ecfg.MTU), zap.Stringer("mode", cfg.Mode))
	return s, nil
}

// Config returns the effective configuration (defaults filled).
func (s *Stack) Config() Config { return s.cfg }

// LocalAddr is the stack's address (MAC, IPv4; Port 0).
func (s *Stack) LocalAddr() ndp.Addr {
	return ndp.Addr{MAC: s.cfg.Endpoint.LocalMAC, IP: s.localIP}
}

// MSS is the largest payload per packet.
func (s *Stack) MSS() int { return s.ep.MSS() }

// Now reads the stack's clock.
func (s *Stack) Now() ndp.Time { return s.clock() }

// Stats returns a snapshot of the counters.
// It takes the stack's lock; StatsSnapshot reads them without contending
// with a busy stack's batches.
func (s *Stack) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statsLocked()
}

func (s *Stack) statsLocked() Stats {
	st := s.stats
	st.Endpoint = s.ep.Stats()
	st.PullQueue = s.pulls.Stats()
	st.Wakeups = s.wakeups.Load()
	if ls, ok := s.link.(linkStatser); ok {
		st.Link = ls.LinkStats()
	}
	return st
}

// Poll runs one batch at the stack's clock and reports whether it did any
// work. Embedders that set NoBackground call it in their loop.
func (s *Stack) Poll() bool {
	s.mu.Lock()
	did := s.pollLocked(s.clock())
	s.unlock()
	return did
}

// unlock releases the stack's lock, then kicks the link when a transmit
// under it queued frames. The kick is a syscall (AF_XDP: a sendto, which
// in copy mode runs the frames' whole delivery into the peer, 2-5 µs and
// more when the thread is descheduled inside it); made under the lock, it
// held every other waiter of the stack that long. Every lock section that
// may transmit ends with unlock, not mu.Unlock.
func (s *Stack) unlock() {
	kick := s.kickDue
	s.kickDue = false
	s.mu.Unlock()
	if kick {
		if err := s.link.Kick(); err != nil {
			s.mu.Lock()
			s.txFailedLocked(s.clock(), err)
			s.mu.Unlock()
		}
	}
}

// PollLoop is Poll for an embedder's own poll loop (ndpd's core).
//
// With deferTx, the frames its received batch produced (ACKs) stay queued
// unless the batch also released PULLs: they leave with the next poll that
// receives nothing, or an API call. An embedder that hands what it
// received to another thread first (ndpd's core loop, feeding an
// application on the same CPU) defers, so the receiver gets the bytes
// before the ACK's transmit kick is paid and the ACK leaves in one kick
// with what the receiver answers.
//
// spun: the loop came round again at once since its last poll (it did not
// sleep), so a long gap since the stack's last poll is a stall of the host,
// told to the endpoint before its timers run, as a spinning waiter's is
// (spinPollLocked).
func (s *Stack) PollLoop(deferTx, spun bool) bool {
	s.mu.Lock()
	s.checkStall = spun
	did := s.pollDeferLocked(s.clock(), deferTx)
	s.checkStall = false // a closed stack's poll returns before it looks
	s.unlock()
	return did
}

// pollLocked is one run-to-completion batch: receive up to Batch frames and
// hand each to the endpoint, route its events, release due PULLs, fire due
// timers, then fill transmit buffers from the endpoint and send them as one
// batch. No allocation, logging or per-packet syscall.
func (s *Stack) pollLocked(now ndp.Time) bool { return s.pollDeferLocked(now, false) }

// spinPollLocked is a spinning waiter's poll (Read, Accept): it reads the
// clock once, after receiving, and returns that reading for the caller's
// next checks and await. A waiter that read the clock before its poll paid
// a second read whenever frames arrived (the frames are handled at a
// reading taken after them, see pollDeferLocked), and on this VM a read
// costs 60-80 ns, on the critical path of the frame that ends the wait.
//
// spun: the waiter spun on since its last poll (waitState.spun), so it
// meant to poll again at once, and a long gap since the stack's last poll
// by anyone is a stall of the host (its thread descheduled, the VM
// stalled, a GC pause, a transmit kick that took that long), which the
// poll tells the endpoint before its timers run (ndp.Endpoint.NoteStall).
func (s *Stack) spinPollLocked(deferTx, spun bool) ndp.Time {
	s.pollNow = 0
	s.checkStall = spun
	s.pollDeferLocked(0, deferTx)
	s.checkStall = false // a closed stack's poll returns before it looks
	if s.pollNow == 0 {  // closed: the poll returned before reading it
		s.pollNow = s.clock()
	}
	return s.pollNow
}

// pollDeferLocked is pollLocked; with deferTx (PollBusy waiters) frames
// received in this batch do not trigger a transmit, nor the timers, yet
// (unless the batch released PULLs, which always leave at once): the caller checks
// its condition first, so when the application answers at once (an RPC
// server writing its response, a client closing after the response) the
// ACKs leave in the same transmit batch as its data, one kick instead of
// two on the critical path. The deferred frames go out with the next poll
// or API call of any goroutine (txDeferred).
func (s *Stack) pollDeferLocked(now ndp.Time, deferTx bool) bool {
	if s.closed {
		return false
	}
	s.stats.Polls++
	if s.board.want.Load() {
		s.publishLocked()
	}
	work := false
	n := s.link.Receive(s.rx)
	fresh := now == 0
	if fresh {
		// spinPollLocked: one reading, after the frames arrived.
		now = s.clock()
		s.pollNow = now
	}
	if n > 0 {
		work = true
		// The frames are handled at a clock read taken after they
		// were received, not at the caller's: that read may precede
		// the frames' arrival (an afterCallUnlock poll after the kick
		// runs at the call's now, a spinner or sleeper descheduled
		// between its read and this poll), and an ACK handled at it
		// gave an RTT sample of 0 µs (the peer answered during the
		// kick) or a sample that missed the local delay. One read
		// per batch that received frames; a poll that finds nothing
		// keeps the caller's now (19b9687: a goroutine driving both
		// stacks must not time out what it has not let the peer see).
		if !fresh {
			now = max(now, s.clock())
		}
		if s.cfg.Capture != nil {
			s.cfg.Capture.Frames(s.rx[:n], capture.RX)
		}
		s.stats.RxFrames += uint64(n)
		for i := 0; i < n; i++ {
			if err := s.ep.HandleFrame(s.rx[i], now); err != nil {
				s.stats.RxRejected++
			}
		}
		// DATA that arrived unpulled took link time from the pulled
		// packets (docs/decisions.md: "Pull pacing charges unpulled
		// DATA"); charged before its own pulls join the queue.
		if b, from := s.ep.TakeUnpulledBytes(); b > 0 {
			s.pulls.Charge(now, b, from)
		}
		// Events are drained once per batch: the endpoint coalesces them
		// per connection (one EventPulls with the batch's count, one
		// EventReadable), so a batch of a transfer's DATA costs one
		// pull-queue Add and one wakeup, not one per packet.
		s.drainEventsLocked(now)
		s.link.ReleaseReceived()
		// Pulled packets shorter than a full frame give their unused pull-slot
		// time back to the pacer (docs/decisions.md: "Pull pacing refunds short packets").
		if short := s.ep.TakePullShortfall(); short > 0 {
			s.pulls.Refund(now, short)
		}
	} else {
		// Nothing arrived: the endpoint's deferrable work (time-wait
		// room for the next close) costs no frame its answer, nor does
		// the release of a Conn closed with CloseAndReuseSoon.
		s.ep.HandleIdle(now)
		if c := s.lateClose.Load(); c != nil && s.lateClose.CompareAndSwap(c, nil) {
			c.releaseSoonLocked()
		}
	}
	if s.checkStall {
		s.checkStall = false
		if now > s.lastPollAt && s.lastPollAt != 0 {
			s.ep.NoteStall(now-s.lastPollAt, now)
		}
	}
	s.lastPollAt = max(s.lastPollAt, now)
	released := 0
	if t, ok := s.pulls.NextAt(); ok && t <= now {
		// A PULL is due: release it and those of the next PullBatch-1
		// slots with it (pullHorizon), in one transmit kick.
		horizon := now + s.pullHorizon
		for {
			h, ok := s.pulls.Next(horizon)
			if !ok {
				break
			}
			s.ep.PullReleased(h, now)
			s.stats.PullsReleased++
			released++
			work = true
		}
	}
	// A deferring poll that received frames leaves the timers, as it
	// leaves its ACKs, to the next poll (txDeferred): the caller is about
	// to take what arrived, and the timers' work (the new connection's
	// first deadline, computed from what its frames changed: rearm) would
	// delay the hand-off. A timer is seldom due at the very poll that
	// receives, and the waiter polls again at once if it keeps waiting.
	deferred := deferTx && n > 0 && released == 0
	if !deferred {
		if t, ok := s.ep.NextTimer(); ok && t <= now {
			s.ep.HandleTimers(now)
			work = true
		}
	}
	s.drainEventsLocked(now)
	if s.signalled {
		// A goroutine sleeping on the link waits for frames this poll
		// consumed: wake it (one eventfd write per batch, only then).
		s.signalled = false
		if s.sleeping.Load() && !s.selfPoll {
			s.link.Wake()
		}
	}
	if deferred {
		// ACKs may wait for the caller's next call; PULLs are the
		// senders' clock and leave now (a bulk reader that processes
		// what it read before reading again would otherwise hold every
		// sender's next packet back for that long).
		s.txDeferred = true
		return work
	}
	s.txDeferred = false
	if s.flushTxLocked(now) {
		work = true
	}
	return work
}

// flushTxLocked fills transmit buffers from the endpoint and sends them.
func (s *Stack) flushTxLocked(now ndp.Time) bool {
	sent := false
	if s.pushRetry != 0 && now >= s.pushRetry {
		s.pushRetry = 0
	}
	if !s.ep.HasOutput() {
		// Nothing to build (the common case while spinning): no transmit
		// buffer to take and give back; the link still reaps completions
		// and re-kicks frames a transient error left on its ring.
		if err := s.link.Transmit(nil); err != nil {
			s.txFailedLocked(now, err)
		}
		s.kickDue = true
		return false
	}
	// Ask the link for 1 buffer, then 4, 16, ... up to Batch while every
	// buffer gets used: an idle poll (the common case while spinning)
	// costs one buffer, not a whole batch handed out and taken back. All
	// frames of a batch go out in one Transmit (one kick).
	for {
		total, m, want := 0, 0, 1
		full := true // every buffer handed out was filled
		for full && total < len(s.tx) {
			k := s.link.AllocTx(s.tx[total:min(total+want, len(s.tx))])
			if k == 0 {
				if total == 0 {
					s.stats.TxBackpressure++
					return sent
				}
				break
			}
			total += k
			for m < total {
				b := s.tx[m][:s.frameCap]
				allow := s.edge.Tokens(now) >= int64(s.frameCap)
				n, pushed := s.ep.PollFrame(b, now, allow)
				if n == 0 {
					if !allow && s.pushRetry == 0 {
						s.pushRetry = s.edge.NextAllowed(now, s.frameCap)
					}
					full = false
					break
				}
				if pushed {
					s.edge.Allow(now, n)
				}
				s.tx[m] = b[:n]
				m++
			}
			want *= 4
		}
		if m > 1 && m <= dataFirstMax {
			s.dataFirst(m)
		}
		if s.cfg.Capture != nil {
			s.cfg.Capture.Frames(s.tx[:m], capture.TX)
		}
		if err := s.link.Transmit(s.tx[:m]); err != nil {
			s.txFailedLocked(now, err)
		}
		s.kickDue = true
		s.stats.TxFrames += uint64(m)
		if m > 0 {
			sent = true
		}
		if !full || m < len(s.tx) {
			return sent
		}
	}
}

// txFailedLocked counts a failed transmit and logs it, at most once a
// second: a broken link fails every poll, and polls spin.
func (s *Stack) txFailedLocked(now ndp.Time, err error) {
	s.stats.TxErrors++
	if s.txErrLogged == 0 || now-s.txErrLogged >= ndp.Time(time.Second) {
		s.txErrLogged = now
		s.log.Warn("engine: transmit failed", zap.Error(err), zap.Uint64("failures", s.stats.TxErrors))
	}
}

// dataFirstMax: small batches (an RPC's request or answer and the ACK of
// what came before) are sent data first. In AF_XDP copy mode the kernel
// delivers a batch's frames one after the other inside the sendto, so the
// peer gets the data a frame-time earlier; the ACK follows in the same
// kick. Large batches (bulk transfer, pull pacing) keep the endpoint's order.
const dataFirstMax = 4

// dataFirst stably moves DATA frames in front of control frames in
// s.tx[:m], mirroring each move in the link's buffers.
func (s *Stack) dataFirst(m int) {
	next := 0 // where the next DATA frame goes
	for i := 0; i < m; i++ {
		f := s.tx[i]
		if len(f) <= ndpHeaderOffset+1 || ndp.PacketType(f[ndpHeaderOffset+1]) != ndp.TypeData {
			continue
		}
		for j := i; j > next; j-- { // bubble it down, keeping the others' order
			s.tx[j], s.tx[j-1] = s.tx[j-1], s.tx[j]
			s.link.SwapTx(j, j-1)
		}
		next++
	}
}

// drainEventsLocked routes the endpoint's events: PULL requests into the
// pull queue, new connections to listeners, readiness to waiters. now 0:
// the clock is read only if an event needs it (a Read's drain, which
// mostly finds nothing or PULLs, need not pay for a reading).
func (s *Stack) drainEventsLocked(now ndp.Time) {
	for {
		ev, ok := s.ep.PollEvent()
		if !ok {
			break
		}
		switch ev.Kind {
		case ndp.EventPulls:
			if s.cfg.Policy == pullpacer.PolicyDeadline {
				// D3 allocates by remaining size: tell the queue what arrived
				// (an arrival is what asks for pulls) before it queues them.
				if n, ok := s.ep.Received(ev.Handle); ok {
					s.pulls.Progress(ev.Handle, int64(n))
				}
			}
			s.pulls.Add(ev.Handle, ev.Count)
			continue
		case ndp.EventDropPulls:
			s.pulls.Drop(ev.Handle)
			continue
		case ndp.EventAccepted:
			if now == 0 {
				now = s.clock()
			}
			s.acceptLocked(ev, now)
			continue
		}
		c := s.connLocked(ev.Handle)
		if c == nil {
			continue
		}
		if c.orphan {
			if ev.Kind == ndp.EventClosed {
				c.closed = true
			}
			s.drainOrphanLocked(c)
			continue
		}
		s.signalled = true
		switch ev.Kind {
		case ndp.EventReadable:
			if c.readReadyLocked(c.rdMin) {
				signal(c.rdWait)
			}
		case ndp.EventWritable:
			signal(c.wrWait)
		case ndp.EventClosed:
			s.pulls.Remove(ev.Handle)
			c.closed, c.err = true, ev.Err
			signal(c.rdWait)
			signal(c.wrWait)
		}
		if s.cfg.OnEvent != nil {
			s.cfg.OnEvent(c, ev.Kind)
		}
	}
	for {
		h, ok := s.pulls.PollQuenched()
		if !ok {
			break
		}
		s.stats.Quenched++
		if now == 0 {
			now = s.clock()
		}
		s.ep.Quench(h, now)
	}
}

// ndpHeaderOffset is where the NDP header starts in a frame (Ethernet + IPv4 without options + UDP).
const ndpHeaderOffset = 14 + 20 + 8

func (s *Stack) acceptLocked(ev ndp.Event, now ndp.Time) {
	l := s.listeners[ev.LocalPort]
	if l == nil || l.closed || l.n == len(l.queue) {
		s.stats.AcceptDropped++
		s.ep.Abort(ev.Handle, now)
		s.ep.Release(ev.Handle)
		return
	}
	c := s.newConnLocked(ev.Handle, ev.Remote, ev.LocalPort)
	c.Priority, c.Size, c.Deadline = ev.Priority, ev.Size, ev.Deadline
	if ev.Priority > 0 || ev.Size > 0 || ev.Deadline > 0 {
		s.pulls.SetFlow(ev.Handle, pullpacer.Flow{Priority: ev.Priority, Size: ev.Size, Deadline: ev.Deadline}, now)
	}
	l.queue[(l.head+l.n)%len(l.queue)] = c
	l.n++
	signal(l.wait)
	s.signalled = true
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(c, ndp.EventAccepted)
	}
}

func (s *Stack) newConnLocked(h ndp.Handle, remote ndp.Addr, localPort uint16) *Conn {
	var c *Conn
	if n := len(s.free); n > 0 {
		c = s.free[n-1]
		s.free = s.free[:n-1]
		c.s, c.h, c.remote, c.localPort = s, h, remote, localPort
	} else {
		c = &Conn{s: s, h: h, remote: remote, localPort: localPort}
	}
	s.conns[h.Slot()] = c
	s.appConns.Add(1)
	return c
}

// connLocked returns the Conn of handle h, or nil.
func (s *Stack) connLocked(h ndp.Handle) *Conn {
	i := h.Slot()
	if i < 0 || i >= len(s.conns) {
		return nil
	}
	if c := s.conns[i]; c != nil && c.h == h {
		return c
	}
	return nil
}

// forgetConnLocked removes c from the stack's connections.
func (s *Stack) forgetConnLocked(c *Conn) {
	if i := c.h.Slot(); i >= 0 && i < len(s.conns) && s.conns[i] == c {
		s.conns[i] = nil
	}
}

// signal leaves a token in a waiter channel (capacity 1): a goroutine that
// blocks later returns at once, so no wakeup is lost.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Dial opens a connection to ip:port (NDP port). It resolves the peer's MAC
// (cached; the kernel's neighbour table otherwise, which may block until
// ctx ends), then registers the connection: nothing is sent until data is
// written (zero-RTT).
func (s *Stack) Dial(ctx context.Context, ip [4]byte, port uint16, opts ndp.DialOptions) (*Conn, error) {
	c, _, err := s.dial(ctx, ip, port, opts, nil, false)
	return c, err
}

// DialWrite is Dial, then as much of p as the send buffer takes at once
// (and, with closeWrite and all of p taken, the FIN), in one lock section
// at one clock reading: for a caller with its first message at hand
// (sockapi's CallInto), where Dial and Write each took the lock and read
// the clock (60-80 ns a reading on the 2-vCPU VM) on the critical path of
// the request. It never blocks on the send buffer: n < len(p) leaves the
// rest (and the FIN) to Write. A Dial error returns a nil Conn; a write
// error returns the Conn with it.
func (s *Stack) DialWrite(ctx context.Context, ip [4]byte, port uint16, opts ndp.DialOptions, p []byte, closeWrite bool) (*Conn, int, error) {
	return s.dial(ctx, ip, port, opts, p, closeWrite)
}

// dial is Dial, and with p or closeWrite DialWrite.
func (s *Stack) dial(ctx context.Context, ip [4]byte, port uint16, opts ndp.DialOptions, p []byte, closeWrite bool) (*Conn, int, error) {
	now := s.clock()
	s.mu.Lock()
	e, cached := s.neigh[ip]
	if !cached || now >= e.expires {
		s.mu.Unlock()
		mac, err := s.resolve(ctx, ip)
		if err != nil {
			return nil, 0, err
		}
		e.mac = mac
		s.mu.Lock()
		now = s.clock() // the resolve may have blocked
	}
	mac := e.mac
	if s.closed {
		s.mu.Unlock()
		return nil, 0, ErrStackClosed
	}
	h, err := s.ep.Dial(ndp.Addr{MAC: mac, IP: ip, Port: port}, opts, now)
	if err != nil {
		s.mu.Unlock()
		return nil, 0, err
	}
	lport, _ := s.ep.LocalPort(h)
	c := s.newConnLocked(h, ndp.Addr{MAC: mac, IP: ip, Port: port}, lport)
	c.Priority, c.Size, c.Deadline = opts.Priority, opts.Size, opts.Deadline
	if len(p) == 0 && !closeWrite {
		s.mu.Unlock()
		return c, 0, nil
	}
	var n int
	if len(p) > 0 {
		n, err = s.ep.Write(h, p, now)
	}
	if err == nil && n == len(p) && closeWrite {
		err = s.ep.CloseWrite(h, now)
	}
	s.afterCallUnlock(now)
	return c, n, c.mapEndpointErr(err)
}

func (s *Stack) resolve(ctx context.Context, ip [4]byte) ([6]byte, error) {
	if ip == s.localIP {
		return [6]byte{}, fmt.Errorf("%w: %v is this stack's own address (no loopback over the link)", ErrNoNeighbor, netip.AddrFrom4(ip))
	}
	now := s.clock()
	s.mu.Lock()
	e, ok := s.neigh[ip]
	s.mu.Unlock()
	if ok && now < e.expires {
		return e.mac, nil
	}
	if s.cfg.Resolver == nil {
		return [6]byte{}, fmt.Errorf("%w: %v (no resolver configured)", ErrNoNeighbor, netip.AddrFrom4(ip))
	}
	s.resolveMu.Lock()
	mac, err := s.cfg.Resolver.Resolve(ctx, ip)
	s.resolveMu.Unlock()
	if err != nil {
		return mac, err
	}
	s.mu.Lock()
	s.neigh[ip] = neighEntry{mac: mac, expires: s.clock() + ndp.Time(s.cfg.NeighborTTL)}
	s.mu.Unlock()
	return mac, nil
}

// Listen accepts connections on NDP port port. backlog bounds connections
// accepted by the stack and not yet taken by Accept (zero means 1024);
// beyond it new connections are refused (reset).
func (s *Stack) Listen(port uint16, backlog int) (*Listener, error) {
	if backlog <= 0 {
		backlog = 1024
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrStackClosed
	}
	if err := s.ep.Listen(port); err != nil {
		return nil, err
	}
	l := &Listener{s: s, port: port, queue: make([]*Conn, backlog), wait: make(chan struct{}, 1), done: make(chan struct{})}
	s.listeners[port] = l
	return l, nil
}

// Close stops the background poller, aborts every connection, closes the
// listeners and the link, and unblocks every waiter with ErrStackClosed.
func (s *Stack) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	now := s.clock()
	for i, c := range s.conns {
		if c == nil {
			continue
		}
		if !c.closed {
			s.ep.Abort(c.h, now)
		}
		c.stackClosed = true
		c.wakeWaitersLocked()
		s.conns[i] = nil
	}
	for p, l := range s.listeners {
		l.closed = true
		close(l.done)
		delete(s.listeners, p)
	}
	s.drainEventsLocked(now)
	s.flushTxLocked(now) // the RESETs
	s.closed = true
	close(s.done)
	s.unlock()
	s.link.Wake()
	<-s.bgDone
	err := s.link.Close()
	if c, ok := s.cfg.Resolver.(io.Closer); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	s.log.Info("engine: stack closed")
	return err
}

// afterCallUnlock ends an API call that changed the endpoint: it sends
// what the call produced (so data goes out at once, from the calling
// goroutine), polls once, releases the lock and kicks the link, and wakes
// a sleeping background poller, whose sleep may now be too long (a new
// timer). The send comes before the poll: frames that came in meanwhile
// (typically the peer's ACK of an earlier reply) would otherwise be
// handled first, on the critical path of the data just written. When no
// other waiter spins on the stack, the kick comes before the poll too (the
// lock is taken again for it, if free): the poll costs a microsecond the
// data would wait for. While others spin, the poll's frames (the ACKs of
// what it took in for other connections) leave in the same kick instead:
// a kick of their own cost 20% more kicks with 8 connections busy.
func (s *Stack) afterCallUnlock(now ndp.Time) {
	if s.closed {
		s.unlock()
		return
	}
	s.flushTxLocked(now)
	if s.spinners.Load() > 0 {
		s.pollLocked(now)
		s.unlock()
	} else {
		s.unlock()
		if s.mu.TryLock() {
			if !s.closed {
				// At the call's now, as the poll before the kick: a
				// thread descheduled between the kick and this poll
				// would otherwise fire the RTO of what it just sent
				// before the peer could answer (a goroutine driving
				// both ends, BenchmarkMemRPC, always did).
				s.pollLocked(now)
			}
			s.unlock()
		}
	}
	if s.sleeping.Load() {
		s.link.Wake()
	}
}

// sleepFor says how long the background poller may sleep at now: until the
// next endpoint timer, pull release or edge-pacer retry (negative: no limit).
func (s *Stack) sleepForLocked(now ndp.Time) time.Duration {
	next := ndp.Time(-1)
	consider := func(t ndp.Time) {
		if next < 0 || t < next {
			next = t
		}
	}
	if t, ok := s.ep.NextTimer(); ok {
		consider(t)
	}
	if t, ok := s.pulls.NextAt(); ok {
		consider(t)
	}
	if s.pushRetry != 0 {
		consider(s.pushRetry)
	}
	if next < 0 {
		return -1
	}
	return time.Duration(max(next-now, 0))
}

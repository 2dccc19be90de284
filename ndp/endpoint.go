package ndp

import (
	"encoding/binary"
	"io"
	"time"
)

// Endpoint is the NDP protocol state of one host interface: connection
// table, per-connection sender/receiver state, time-wait, control queue,
// ready queues, timers and events. It is not safe for concurrent use: one
// goroutine (the engine's core thread, or the simulator) owns it.
type Endpoint struct {
	cfg     Config
	mss     int
	localIP uint32
	rng     rng
	// commodity is cfg.Commodity as the parser uses it.
	commodity commodityParse

	conns     []*conn // slot -> conn (nil = free slot)
	gens      []uint32
	freeSlots []int32
	pool      []*conn // free conn objects with their buffers
	nActive   int

	table     keyTable // connKey -> conn slot (>= 0) or time-wait entry (twVal)
	tw        TimeWait
	listening []uint64 // bitmap of listened NDP ports

	ctl                  ctlQueue
	pullQ, freeQ, pacedQ connRing
	events               eventRing
	timers               timerHeap
	dirty                []*conn // connections whose timer rearm marked (flushTimers)

	// closing holds the connections whose clean close waits for the
	// host's next timer check or idle call (checkDone, finishCloses);
	// closingSince is when the first of them finished. deferCloses: the
	// host calls HandleIdle, so it polls and checks its timers.
	closing      []*conn
	closingSince Time
	deferCloses  bool

	nextEphemeral uint16
	now           Time  // latest time passed in by the caller
	f             Frame // scratch for HandleFrame
	stats         Stats

	pullShortfall int    // bytes pulled packets arrived short of a full frame (TakePullShortfall)
	unpulledBytes int    // wire bytes of DATA that arrived without a PULL (TakeUnpulledBytes)
	unpulledFrom  Handle // the connection whose first-RTT window they all were (TakeUnpulledBytes)
	unpulledMixed bool   // they were not all one connection's first-RTT packets

	seeds rttSeeds // endpoint-level RTT estimates that seed new connections (rtt.go)

	hostStall lateMemory // the host's own stalls (NoteStall): every RTO is at least twice the longest
}

// TakePullShortfall returns, and resets, how many bytes the DATA packets that peers
// sent in answer to this endpoint's PULLs arrived short of a full MTU-sized frame since
// the last call. The host's pull pacer spaces PULLs for full frames; handing it this
// shortfall (pullpacer.PullQueue.Refund) keeps the downlink busy when pulled packets
// are short, as the last packet of a message or a small RPC is.
func (e *Endpoint) TakePullShortfall() int {
	n := e.pullShortfall
	e.pullShortfall = 0
	return n
}

// TakeUnpulledBytes returns, and resets, the wire bytes (frame plus
// WireOverhead) of the DATA packets that arrived since the last call without a
// PULL having asked for them: first-RTT windows, an RPC's request or response,
// retransmissions after a timeout. They share the downlink the host's pull pacer
// fills with pulled packets; handing it these bytes (pullpacer.PullQueue.Charge)
// keeps pulled and pushed traffic together at the pacer's rate. from is the
// connection when every one of those packets was a first-RTT packet (FlagSYN)
// of that one connection, else 0: a new flow's first window need not hold back
// its own pulls (pullpacer.PullQueue.Charge). Call it before draining the
// events of the same packets.
func (e *Endpoint) TakeUnpulledBytes() (bytes int, from Handle) {
	bytes, from = e.unpulledBytes, e.unpulledFrom
	if e.unpulledMixed {
		from = 0
	}
	e.unpulledBytes, e.unpulledFrom, e.unpulledMixed = 0, 0, false
	return bytes, from
}

// NewEndpoint fills defaults into cfg, validates it and returns an Endpoint.
func NewEndpoint(cfg Config) (*Endpoint, error) {
	cfg.populate()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Endpoint{
		cfg:           cfg,
		mss:           MaxPayload(cfg.MTU),
		localIP:       binary.BigEndian.Uint32(cfg.LocalIP[:]),
		rng:           rng{s: cfg.Seed},
		commodity:     cfg.Commodity.parse(),
		conns:         make([]*conn, 0, cfg.MaxConns),
		gens:          make([]uint32, 0, cfg.MaxConns),
		freeSlots:     make([]int32, 0, cfg.MaxConns),
		pool:          make([]*conn, 0, cfg.MaxConns),
		dirty:         make([]*conn, 0, cfg.MaxConns+1), // each conn object at most once (there are at most MaxConns)
		closing:       make([]*conn, 0, cfg.MaxConns),   // active connections only
		table:         newKeyTable(cfg.MaxConns + cfg.MaxTimeWait),
		listening:     make([]uint64, 65536/64),
		ctl:           ctlQueue{buf: make([]ctlFrame, cfg.ControlQueue)},
		pullQ:         newConnRing(cfg.MaxConns),
		freeQ:         newConnRing(cfg.MaxConns),
		pacedQ:        newConnRing(cfg.MaxConns),
		events:        eventRing{buf: make([]evEntry, 1024)},
		nextEphemeral: 49152,
	}
	e.tw = newTimeWait(cfg.MaxTimeWait, &e.table)
	e.timers = timerHeap{idx: make([]int32, 0, cfg.MaxConns), conns: &e.conns}
	e.commodity.zeroPayload = cfg.ZeroPayload
	return e, nil
}

// Config returns the effective configuration (defaults filled).
func (e *Endpoint) Config() Config { return e.cfg }

// MSS returns the largest payload per packet.
func (e *Endpoint) MSS() int { return e.mss }

// ---- connection slots and pool ----

func (e *Endpoint) reserve(n int) {
	for len(e.pool) < n && len(e.pool)+e.nActive < e.cfg.MaxConns {
		e.pool = append(e.pool, newConn(&e.cfg, true))
	}
}

func (e *Endpoint) allocConn() (*conn, error) {
	if e.nActive >= e.cfg.MaxConns {
		return nil, ErrTooManyConns
	}
	var idx int32
	if n := len(e.freeSlots); n > 0 {
		idx = e.freeSlots[n-1]
		e.freeSlots = e.freeSlots[:n-1]
	} else {
		idx = int32(len(e.conns))
		e.conns = append(e.conns, nil)
		e.gens = append(e.gens, 1)
	}
	var c *conn
	n := len(e.pool)
	if n > 0 && e.pool[n-1].stale {
		// The top was released since the last idle call (an RPC client
		// closes and dials back to back, with no idle poll between):
		// take a clean one and leave the stale one on top for
		// HandleIdle to reset in the next wait (resetting it here cost
		// the Dial 0.2 µs). The clean one is the one under it, or, when
		// the pool holds only the stale one (a client's pool, which no
		// Listen reserved, cycles one connection), a new one: the pool
		// grows by one, once.
		switch {
		case n > 1 && !e.pool[n-2].stale:
			e.pool[n-1], e.pool[n-2] = e.pool[n-2], e.pool[n-1]
		case n == 1 && e.nActive+n < e.cfg.MaxConns:
			n = 0
		}
	}
	if n > 0 {
		c = e.pool[n-1]
		e.pool = e.pool[:n-1]
		if c.stale {
			c.reset()
		}
	} else {
		c = newConn(&e.cfg, false)
	}
	c.idx, c.gen = idx, e.gens[idx]
	e.conns[idx] = c
	e.nActive++
	c.entropy = uint16(e.rng.next())
	return c, nil
}

// freeConn releases c's slot. If c still sits in a ready queue the slot is
// recycled when the queue pops it (dead marks it).
func (e *Endpoint) freeConn(c *conn) {
	if c.inTable {
		e.table.del(c.key)
		c.inTable = false
	}
	c.timerAt = 0
	e.timers.set(c)
	c.released, c.closed = true, true
	if c.inPullQ || c.inFreeQ || c.inPacedQ {
		return // finished by recycle() when popped
	}
	e.recycle(c)
}

func (e *Endpoint) recycle(c *conn) {
	if e.conns[c.idx] != c {
		return
	}
	e.conns[c.idx] = nil
	e.gens[c.idx]++
	if e.gens[c.idx] == 0 {
		e.gens[c.idx] = 1
	}
	e.freeSlots = append(e.freeSlots, c.idx)
	c.stale = true
	e.pool = append(e.pool, c)
	e.nActive--
}

// conn returns the live, unreleased connection named by h.
func (e *Endpoint) conn(h Handle) *conn {
	i := h.index()
	if i < 0 || int(i) >= len(e.conns) {
		return nil
	}
	c := e.conns[i]
	if c == nil || c.gen != h.gen() || c.released {
		return nil
	}
	return c
}

// LocalPort returns the local NDP port of connection h: the listened port of an
// accepted connection, the chosen (possibly ephemeral) port of a dialed one.
func (e *Endpoint) LocalPort(h Handle) (uint16, bool) {
	c := e.conn(h)
	if c == nil {
		return 0, false
	}
	return c.key.localPort, true
}

func (e *Endpoint) isListening(p uint16) bool { return e.listening[p/64]&(1<<(p%64)) != 0 }

// ---- application API ----

// Listen accepts connections on NDP port port and preallocates
// Config.ListenReserve connection objects so that first-RTT packets open
// connections without allocating.
func (e *Endpoint) Listen(port uint16) error {
	if port == 0 {
		return ErrInvalidConfig
	}
	if e.isListening(port) {
		return ErrPortInUse
	}
	e.listening[port/64] |= 1 << (port % 64)
	e.reserve(e.cfg.ListenReserve)
	return nil
}

// Unlisten stops accepting on port; established connections are unaffected.
func (e *Endpoint) Unlisten(port uint16) { e.listening[port/64] &^= 1 << (port % 64) }

// Dial registers a connection to remote. Nothing is sent until data (or
// CloseWrite) is queued: the first IW packets are then pushed at once,
// each carrying SYN (zero-RTT open).
func (e *Endpoint) Dial(remote Addr, opts DialOptions, now Time) (Handle, error) {
	e.now = max(e.now, now)
	if remote.IP == [4]byte{} || remote.Port == 0 {
		return 0, ErrInvalidConfig
	}
	c, err := e.allocConn()
	if err != nil {
		return 0, err
	}
	lport := opts.LocalPort
	if lport == 0 {
		if lport = e.ephemeral(); lport == 0 {
			e.recycle(c)
			return 0, ErrPortInUse
		}
	}
	rip := binary.BigEndian.Uint32(remote.IP[:])
	for {
		id := uint32(e.rng.next())
		if id == 0 {
			continue
		}
		k := connKey{remoteIP: rip, remotePort: remote.Port, localPort: lport, connID: id}
		// The insert is the uniqueness check against connections and
		// time-wait alike: one probe sequence.
		if !e.table.add(k, c.idx) {
			if e.table.n >= e.table.max {
				e.recycle(c)
				return 0, ErrTooManyConns
			}
			continue
		}
		c.key = k
		break
	}
	c.remote = remote
	c.dialer = true
	c.prio, c.flowSize, c.deadline, c.paced = opts.Priority, opts.Size, opts.Deadline, opts.Paced
	c.snd.start(uint32(e.rng.next()), e.cfg.IW)
	c.snd.lastActivity = now
	c.quietSince = now
	e.seedRTT(c, now)
	c.inTable = true
	e.stats.ConnsOpened++
	return c.handle(), nil
}

// ephemeral picks the next local port in [49152, 65535] nobody listens on
// (0 if all are listened on). Ports may be shared by several dialed
// connections: the connection id tells them apart.
func (e *Endpoint) ephemeral() uint16 {
	for range 65536 - 49152 {
		p := e.nextEphemeral
		e.nextEphemeral++
		if e.nextEphemeral == 0 {
			e.nextEphemeral = 49152
		}
		if !e.isListening(p) {
			return p
		}
	}
	return 0
}

// Write copies p into h's send buffer and returns how much fit (a short
// count means the buffer is full: wait for EventWritable).
func (e *Endpoint) Write(h Handle, p []byte, now Time) (int, error) {
	e.now = max(e.now, now)
	c := e.conn(h)
	if c == nil {
		return 0, ErrInvalidHandle
	}
	if c.closed {
		if c.closeErr != nil {
			return 0, c.closeErr
		}
		return 0, ErrClosed
	}
	if c.snd.finQueued {
		return 0, ErrClosed
	}
	idle := !e.waiting(c)
	n := c.snd.write(p)
	if n > 0 {
		if idle { // the time spent idle is no silence (silence.go)
			c.quietSince = now
		}
		e.dataQueued(c, now)
	}
	if n < len(p) {
		c.writeBlocked = true
	}
	c.snd.moreComing = n < len(p)
	return n, nil
}

// CloseWrite queues a FIN after the data already written.
func (e *Endpoint) CloseWrite(h Handle, now Time) error {
	e.now = max(e.now, now)
	c := e.conn(h)
	if c == nil {
		return ErrInvalidHandle
	}
	if c.closed {
		if c.closeErr != nil {
			return c.closeErr
		}
		return nil
	}
	if !c.snd.finQueued {
		if !e.waiting(c) {
			c.quietSince = now
		}
		c.snd.moreComing = false
		c.snd.finQueued = true
		e.dataQueued(c, now)
	}
	return nil
}

// dataQueued: new data (or FIN) is available to send. After LAST went out
// the peer dropped our pulls, so the new data gets a fresh push window.
func (e *Endpoint) dataQueued(c *conn, now Time) {
	s := &c.snd
	if s.lastSent {
		s.lastSent = false
		s.pushCredit = e.cfg.IW
	}
	if s.una == s.nxtSeq { // idle before: restart the stall clock
		s.lastActivity = now
	}
	e.schedule(c)
	e.rearm(c)
}

// Read copies in-order received bytes into p. It returns io.EOF once the
// peer's FIN was reached, the connection's error if it failed, and
// (0, nil) when nothing is available yet.
func (e *Endpoint) Read(h Handle, p []byte) (int, error) {
	c := e.conn(h)
	if c == nil {
		return 0, ErrInvalidHandle
	}
	if c.closeErr != nil {
		return 0, c.closeErr
	}
	r := &c.rcv
	n := r.read(p)
	if n > 0 {
		e.flushPulls(c)
		return n, nil
	}
	if r.finKnown && r.readOff >= r.finOff {
		return 0, io.EOF
	}
	return 0, nil
}

// Readable returns the number of in-order bytes Read would return now.
func (e *Endpoint) Readable(h Handle) int {
	if c := e.conn(h); c != nil {
		return c.rcv.readable()
	}
	return 0
}

// ReadEnded reports whether h's stream has arrived up to its end (or the
// connection failed or is unknown): once Read has returned the bytes
// buffered now, it returns io.EOF or an error instead of waiting for more.
func (e *Endpoint) ReadEnded(h Handle) bool {
	c := e.conn(h)
	if c == nil || c.closeErr != nil {
		return true
	}
	return c.rcv.finKnown && c.rcv.nxtOff >= c.rcv.finOff
}

// Abort resets the connection: the peer is told (RESET) and fails with
// ErrConnReset; locally EventClosed carries ErrClosed.
func (e *Endpoint) Abort(h Handle, now Time) { e.AbortCode(h, now, ResetAbort) }

// AbortCode is Abort telling the peer why: it fails with code.Err().
func (e *Endpoint) AbortCode(h Handle, now Time, code ResetCode) {
	e.now = max(e.now, now)
	if c := e.conn(h); c != nil && !c.closed {
		e.closeConn(c, ErrClosed, now, true, code)
	}
}

// Quench fails the connection at both ends with ErrDeadlineUnmeetable (the
// pull scheduler found its D3 deadline cannot be met).
func (e *Endpoint) Quench(h Handle, now Time) {
	e.now = max(e.now, now)
	if c := e.conn(h); c != nil && !c.closed {
		e.closeConn(c, ErrDeadlineUnmeetable, now, true, ResetDeadline)
	}
}

// Release tells the Endpoint the application is done with h. A closed
// connection is freed at once. If the peer's stream has not ended yet the
// connection is aborted (RESET, as TCP does on close with unread data).
// Otherwise the write side is closed (FIN) if it was not, and the
// connection lingers, without events, until its data is acknowledged.
func (e *Endpoint) Release(h Handle) {
	c := e.conn(h)
	if c == nil {
		return
	}
	c.released = true
	switch {
	case c.closed:
		e.freeConn(c)
	case !c.readDone():
		e.closeConn(c, ErrClosed, e.now, true, ResetAbort)
	default:
		if !c.snd.finQueued {
			if !e.waiting(c) {
				c.quietSince = e.now
			}
			c.snd.moreComing = false
			c.snd.finQueued = true
			e.dataQueued(c, e.now)
		}
	}
}

// closeConn finishes c: optional RESET to the peer, time-wait entry,
// EventClosed, and freeing if already released. A connection whose clean
// close is pending (checkDone) closes cleanly whatever err says: it had
// finished, as it would have been closed already without the deferral
// (a RESET from the peer or an Abort then found it in time-wait).
func (e *Endpoint) closeConn(c *conn, err error, now Time, reset bool, code ResetCode) {
	if c.closed {
		return
	}
	if c.closing {
		e.dropClosing(c)
		err, reset, code = nil, false, 0
	}
	c.closed, c.closeErr = true, err
	kind := twClosed
	if err != nil {
		kind = twAborted
	}
	if reset {
		e.queueCtl(c, TypeReset, 0, 0, 0, code)
	}
	// The time-wait entry takes over c's table entry (or makes one).
	c.inTable = false
	if e.tw.add(c.key, now+Time(e.cfg.TimeWait), kind, code) {
		e.stats.TimeWaitEvicted++
	}
	c.timerAt = 0
	e.timers.set(c)
	e.dropPulls(c)
	c.snd.pullCredit, c.snd.pushCredit = 0, 0
	e.stats.ConnsClosed++
	if c.released {
		e.freeConn(c)
		return
	}
	e.events.push(evEntry{kind: EventClosed, idx: c.idx, gen: c.gen})
}

// checkDone closes c cleanly once both directions are complete. For a
// host that calls HandleIdle (the engine) the close waits, off the path
// of the frame that completed c, for the host's next timer check
// (NextTimer reports it due at once) or idle call: an RPC client's
// response completes its connection inside the HandleFrame that its Read
// waits for, and the close (the time-wait entry, the timer, EventClosed)
// delayed that Read. Until then c is open and finished: a duplicate of
// the peer's last packet finds it and is re-ACKed as its time-wait entry
// would re-ACK it, and Release leaves it to finish.
func (e *Endpoint) checkDone(c *conn, now Time) {
	if c.closed || c.closing || !c.snd.finQueued || !c.snd.finAcked || !c.snd.allAcked() || !c.readDone() {
		return
	}
	if !e.deferCloses {
		e.closeConn(c, nil, now, false, 0)
		return
	}
	if len(e.closing) == 0 {
		e.closingSince = now
	}
	c.closing = true
	e.closing = append(e.closing, c) // at most the active connections: no growth
}

// finishCloses closes the connections checkDone left closing.
func (e *Endpoint) finishCloses(now Time) {
	for n := len(e.closing); n > 0; n = len(e.closing) {
		c := e.closing[n-1]
		e.closing = e.closing[:n-1]
		c.closing = false
		e.closeConn(c, nil, now, false, 0)
	}
}

// dropClosing takes c out of the closing list.
func (e *Endpoint) dropClosing(c *conn) {
	c.closing = false
	for i, o := range e.closing {
		if o == c {
			last := len(e.closing) - 1
			e.closing[i] = e.closing[last]
			e.closing = e.closing[:last]
			return
		}
	}
}

// Stats returns a snapshot of the counters.
func (e *Endpoint) Stats() Stats {
	s := e.stats
	s.ConnsActive = e.nActive
	s.TimeWaitActive = e.tw.Len()
	if e.seeds.all.valid {
		s.SRTT, s.RTTVar = time.Duration(e.seeds.all.srtt), time.Duration(e.seeds.all.rttvar)
	}
	return s
}

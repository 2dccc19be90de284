package ndp

// conn is one connection: a sender half, a receiver half, a path
// scoreboard and bookkeeping for events, queues and timers. conn objects
// and their buffers are pooled by the Endpoint and reused.
type conn struct {
	idx int32
	gen uint32

	snd   sender
	rcv   receiver
	paths Scoreboard

	connState

	// timerDirty: in the Endpoint's dirty list, its timer to be
	// recomputed (rearm). Outside connState: a reset of a conn still in
	// the list must not let a later rearm add it twice.
	timerDirty bool
}

// connState is a conn's bookkeeping: everything reset clears in one
// assignment, apart from the sender, receiver and scoreboard, whose own
// resets keep their buffers. (A whole
// conn literal assigned over a pooled conn copied its 2.4 KB twice per new
// connection: 6% of BenchmarkMemRPC's CPU.)
type connState struct {
	key     connKey
	remote  Addr
	entropy uint16 // base of this connection's UDP source ports

	// The peer's path numbering, learned from its DATA frames (ctlSrc):
	// the base of its UDP source ports, when peerEntropyOK.
	peerEntropy   uint16
	peerEntropyOK bool

	// stale: in the Endpoint's pool with its last connection's state;
	// reset before reuse (HandleIdle or allocConn, whichever comes first)
	stale bool

	dialer   bool
	inTable  bool // reachable through the connection table
	closed   bool // finished (cleanly or not); EventClosed queued
	closing  bool // finished cleanly, its close pending (Endpoint.closing)
	released bool // application called Release
	closeErr error

	// D3 hints and options (the dialer's own, or those carried by the
	// first-RTT packet that opened an accepted connection)
	prio     uint8
	flowSize int64
	deadline Time
	paced    bool

	// ready queues and timer
	inPullQ, inFreeQ, inPacedQ bool
	heapIdx                    int32
	timerAt                    Time

	// silence (silence.go)
	quietSince Time  // last frame heard from the peer, or last went from idle to waiting
	probeAt    Time  // next keepalive while probing
	probing    bool  // silent for probeAfter: keepalives instead of resends
	probes     uint8 // keepalives sent in this silence

	// coalesced events
	evReadable, evWritable bool
	pullsPending           int    // pulls not yet handed to the host
	pullsHanded            int    // pulls handed to the host pull queue and not released
	pullsOut               int    // pulls released whose DATA has not arrived yet (flushPulls)
	pullEpoch              uint32 // bumped when queued pulls are dropped
	pullEvQueued           bool
	writeBlocked           bool

	// ctlPending is the id+1 of this connection's last queued ACK or PULL
	// frame (0: none), which later ones merge into while it is still
	// queued (Config.CoalesceControl).
	ctlPending uint64
	// A held ACK (Config.AckHold, ackhold.go): packet ackSeq, echoing
	// ackPath, and bit i of ackMore packet ackSeq+1+i, held since ackAt.
	ackHeld bool
	ackPath uint16
	ackSeq  uint32
	ackMore uint64
	ackAt   Time
}

// newConn allocates a connection object; with prealloc its stream buffers
// get their initial size now (Listen's reserve), else on first use.
func newConn(cfg *Config, prealloc bool) *conn {
	return &conn{
		snd:       newSender(cfg, prealloc),
		rcv:       newReceiver(cfg, prealloc),
		paths:     newScoreboard(cfg.Paths, 16*Time(cfg.RTO)),
		connState: connState{heapIdx: -1},
	}
}

// reset prepares a pooled conn for reuse, keeping its buffers.
func (c *conn) reset() {
	c.connState = connState{heapIdx: -1}
	c.snd.reset()
	c.rcv.reset()
	c.paths.reset()
}

func (c *conn) handle() Handle { return makeHandle(c.idx, c.gen) }

// udpSrc maps a path index to this connection's UDP source port.
func (c *conn) udpSrc(path uint16) uint16 { return 0xC000 | ((c.entropy + path) & 0x3FFF) }

// ctlSrc is the UDP source port of a control frame (ACK, NACK, PULL) about
// the peer's path: the port the peer's DATA frames on that path carry, so the
// control frame crosses the network with the same ports as the data it
// answers, the reverse of the same path wherever the fabric routes a port
// pair alike both ways (a label taken from the port, a symmetric hash). A
// link that fails then fails a path for its data and its ACKs together, and
// the sender's scoreboard, which sees only ACKs, NACKs and losses by path,
// counts the failure on the path that has it. With the connection's own port
// for the path instead, the ACK of a packet that crossed a live spine took
// the other spine whenever the two entropies differed in parity: in a
// two-spine leaf-spine with one spine link lost, every path of such a
// connection lost either its data or its ACKs, and no path stood out. Before
// the peer's first DATA frame (or if its port is not one of ours) it is the
// connection's own port.
func (c *conn) ctlSrc(path uint16) uint16 {
	if !c.peerEntropyOK {
		return c.udpSrc(path)
	}
	return 0xC000 | ((c.peerEntropy + path) & 0x3FFF)
}

// notePeerEntropy learns the base of the peer's UDP source ports from a DATA
// frame (ctlSrc).
func (c *conn) notePeerEntropy(f *Frame) {
	if f.SrcPort&0xC000 == 0xC000 && f.Header.PathID <= 0x3FFF {
		c.peerEntropy, c.peerEntropyOK = (f.SrcPort-f.Header.PathID)&0x3FFF, true
	}
}

// readDone reports whether the peer's whole stream (up to FIN) arrived.
func (c *conn) readDone() bool { return c.rcv.finKnown && c.rcv.nxtOff >= c.rcv.finOff }

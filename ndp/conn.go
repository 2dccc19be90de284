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

	dialer   bool
	inTable  bool // reachable through the connection table
	closed   bool // finished (cleanly or not); EventClosed queued
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

// readDone reports whether the peer's whole stream (up to FIN) arrived.
func (c *conn) readDone() bool { return c.rcv.finKnown && c.rcv.nxtOff >= c.rcv.finOff }

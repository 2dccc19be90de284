package ndp

// Sender half of a connection.
//
// Send buffer: a ring of Config.SendBuffer bytes holding the stream from
// the oldest unacknowledged byte (bufStart) to the last written byte
// (written). Packets are cut from it on demand at send time (so a packet
// carries whatever is available, up to the MSS) and described by a pktDesc
// in a ring indexed by sequence number; retransmissions resend the same
// descriptor (same seq, stream offset and length).
//
// Credits: pushCredit (the first-RTT window, renewed after LAST when new
// data arrives), pullCredit (how far the peer's pull counter advanced) and
// the urgent retransmissions (below), each of which may go unsolicited.
//
// Retransmission queue: the set of sequence numbers waiting to be resent, a
// bitmap over the window (rtxMap), resent lowest first. The lowest missing
// packet is the one that blocks the peer's reader and, under flow control,
// the one sure to fit its receive buffer. A FIFO would let a PULL or an RTO's
// unsolicited credit go to a later packet the peer cannot take (NACKed again
// for lack of buffer) while the packet it needs stays queued with no credit,
// and the stall probe would keep probing the FIFO's head, which the peer
// already knows about: a deadlock (TestLiveness covers it). urgMap marks the
// queued packets that are resent without waiting for a PULL (declared lost by
// the RTO, or bounced when no PULL will come); their count is the
// unsolicited credit, so that credit always goes to those very packets.

type pktState uint8

const (
	pktFree      pktState = iota
	pktInflight           // sent, no feedback yet
	pktAcked              // ACKed
	pktRtxQueued          // NACKed / bounced / lost: waiting in the rtx queue
)

type pktDesc struct {
	off       uint64
	sentAt    Time   // latest transmission
	firstAgo  uint32 // karnTwo, karnFirst: the first copy went this many ns before sentAt
	n         uint16
	path      uint16 // path of the latest transmission
	firstPath uint16 // karnTwo, karnFirst: path of the first copy
	flags     Flags  // FlagSYN, FlagFIN as first sent
	state     pktState
	first     bool // part of the first push window
	rtoLost   bool // the RTO declared the latest copy lost
	karn      karnState
}

// karnState says which transmissions of a packet an ACK may answer and how to
// tell them apart (Karn's rule, rtt.go). An ACK echoes the path of the copy it
// answers, and a resend never takes the path of the copy before it, so the
// path tells copies apart as long as the one in question is alone on its path.
type karnState uint8

const (
	karnOne   karnState = iota // one copy that can be ACKed: every ACK is a sample
	karnTwo                    // two copies on different paths, the first on firstPath
	karnFirst                  // more copies; the first is the only one on firstPath
	karnMany                   // unknown: no sample
)

// noteResend updates d's Karn state as it is sent again at now on path.
func (d *pktDesc) noteResend(now Time, path uint16) {
	if !d.rtoLost {
		// asked for by a NACK or a bounce: the copy it named was cut; with
		// several copies out it is not known which
		if d.karn != karnOne {
			d.karn = karnMany
		}
		return
	}
	d.rtoLost = false
	ago := uint64(now-d.sentAt) + uint64(d.firstAgo)
	switch {
	case d.karn == karnMany:
	case d.karn == karnOne && path != d.path && uint64(now-d.sentAt) < 1<<32:
		d.karn, d.firstPath, d.firstAgo = karnTwo, d.path, uint32(now-d.sentAt)
	case d.karn != karnOne && path != d.firstPath && ago < 1<<32:
		d.karn, d.firstAgo = karnFirst, uint32(ago)
	default:
		d.karn = karnMany
	}
}

// rttSample returns the RTT sample the ACK h of d gives at now, if any, and
// whether it proves the RTO that declared d lost spurious (the copy it
// declared lost was ACKed).
func (d *pktDesc) rttSample(h *Header, now Time) (m Time, spurious, ok bool) {
	if d.karn == karnOne {
		return now - d.sentAt, d.rtoLost, true
	}
	if d.karn == karnMany || h.Flags&FlagAckMore != 0 {
		// an ACK from a merged frame's bitmap (FlagAckMore, handleAck)
		// has no echoed path of its own
		return 0, false, false
	}
	switch {
	case h.PathID == d.firstPath:
		return now - (d.sentAt - Time(d.firstAgo)), true, true
	case d.karn == karnTwo && h.PathID == d.path:
		return now - d.sentAt, d.rtoLost, true
	}
	return 0, false, false
}

const seqMask = maxWindowPkts - 1

type sender struct {
	buf      streamBuf
	bufStart uint64 // stream offset of buf's oldest live byte
	written  uint64 // end of the application's data
	nxtOff   uint64 // next unsent stream offset

	finQueued, finSent, finAcked bool

	isn    uint32
	nxtSeq uint32 // next new sequence number
	una    uint32 // oldest unacknowledged sequence number
	pkts   []pktDesc
	rtxMap seqBitmap // seqs queued for retransmission (state pktRtxQueued)
	urgMap seqBitmap // subset resent unsolicited (RTO-lost, bounced)
	rtxN   int
	urgN   int

	pushCredit int
	pullCredit int
	lastPull   uint32
	pullSeen   bool

	established bool // got ACK/NACK/PULL (a dialer: any frame): the peer has state, stop sending SYN, resends too
	lastSent    bool // LAST went out and no new data since
	// moreComing: the application's last Write did not fit the send
	// buffer, so more data follows as soon as ACKs free room. The sender
	// then never says LAST and keeps its pull credit while it has nothing
	// to send: the receiver keeps pulling and the next data goes pulled,
	// instead of a LAST, dropped pulls and a fresh unsolicited window per
	// send buffer's worth of data (a bulk transfer whose writer waits on a
	// full buffer pushed half its packets that way, into a receive buffer
	// still holding the previous window's data: no-buffer NACKs).
	moreComing bool

	pullsExpected int    // ACK/NACK seen minus packets pulled: PULLs still to come
	ackFrac       uint32 // EWMA of ACK (vs NACK) fraction, 16.16 fixed point
	fbSamples     uint32
	firstSent     int
	firstBounced  int

	rtt   rttState // RTT estimate, base RTO, backoff (rtt.go)
	rtoAt Time     // earliest RTO deadline (0 = none)
	// rackSent is when the latest-sent copy known to have arrived was sent
	// (the send time its ACK's RTT sample names, Karn's rule). A packet in
	// flight sent at or after it is silent: nothing sent as late has
	// arrived, so its missing ACK shows no loss, only that the peer has not
	// answered yet (a receiver descheduled, or still working through the
	// window ahead of the packet). A packet sent before it is lost if its
	// RTO expires: something later got through (RACK's rule, RFC 8985). The
	// RTO declares every expired packet of the second kind lost, but only
	// the oldest silent one: resent, it asks the peer; the rest of the
	// silent flight waits until holdUntil, one more (backed-off) RTO, or
	// until a copy sent at or after heldAt (the resend) is ACKed, which
	// makes them lost at once (they are then older than rackSent). RFC 6298
	// resends only the oldest segment at an RTO for the same reason. Before,
	// a receiver descheduled for longer than the RTO had its whole flight
	// (up to 93 packets) resent unsolicited for nothing, into a receiver
	// that was already behind (docs/datapath.md).
	rackSent     Time
	holdUntil    Time // silent packets are not declared lost before this
	heldAt       Time // when the current hold began (the oldest silent packet's resend)
	rtoStreak    int  // timeout rounds without feedback (timeoutRound)
	roundAt      Time // when the last timeout round was counted
	lastActivity Time // last feedback from the peer or own transmission
}

func newSender(cfg *Config, prealloc bool) sender {
	return sender{
		buf:  newStreamBuf(cfg.SendBuffer, prealloc, cfg.ZeroPayload),
		pkts: make([]pktDesc, maxWindowPkts),
	}
}

func (s *sender) reset() {
	buf, pkts := s.buf, s.pkts
	// Only descriptors of sequence numbers this connection used can be
	// dirty (every other one is written before it is read: reads are
	// bounded by the window [una, nxtSeq)). Clearing just those keeps a
	// new connection at a few descriptors instead of the whole 32 KB table.
	if used := s.nxtSeq - s.isn; used >= uint32(len(pkts)) {
		clear(pkts)
	} else {
		for seq := s.isn; seq != s.nxtSeq; seq++ {
			*s.desc(seq) = pktDesc{}
		}
	}
	*s = sender{buf: buf, pkts: pkts}
}

func (s *sender) start(isn uint32, iw int) {
	s.isn, s.nxtSeq, s.una = isn, isn, isn
	s.pushCredit = iw
	s.ackFrac = 1 << 15
}

// desc is seq's descriptor. The table is indexed from the connection's
// ISN, so each connection on a pooled conn starts at the table's first
// entries, still in cache from the last one (indexed by the random ISN
// itself, a new connection's first descriptor was a cache miss: 14% of
// sendData in BenchmarkMemRPC).
func (s *sender) desc(seq uint32) *pktDesc { return &s.pkts[(seq-s.isn)&seqMask] }

// inWindow reports whether seq was sent and is not below una.
func (s *sender) inWindow(seq uint32) bool { return seq-s.una < s.nxtSeq-s.una }

// free is the number of bytes Write can still accept.
func (s *sender) free() int { return s.buf.limit - int(s.written-s.bufStart) }

func (s *sender) write(p []byte) int {
	n := min(len(p), s.free())
	s.buf.ensure(s.bufStart, s.written, s.written+uint64(n))
	s.buf.put(s.written, p[:n])
	s.written += uint64(n)
	return n
}

// copyOut copies stream bytes [off, off+len(dst)) into dst.
func (s *sender) copyOut(dst []byte, off uint64) { s.buf.get(dst, off) }

func (s *sender) hasNew() bool {
	return (s.nxtOff < s.written || (s.finQueued && !s.finSent)) && s.nxtSeq-s.una < maxWindowPkts
}

// peekRtx returns the lowest queued retransmission.
func (s *sender) peekRtx() (uint32, bool) {
	if s.rtxN == 0 {
		return 0, false
	}
	return s.rtxMap.lowest(s.una)
}

// peekUrgent returns the lowest retransmission to send unsolicited.
func (s *sender) peekUrgent() (uint32, bool) {
	if s.urgN == 0 {
		return 0, false
	}
	return s.urgMap.lowest(s.una)
}

func (s *sender) hasRtx() bool { return s.rtxN > 0 }

// hasWork reports whether anything is waiting to be sent.
func (s *sender) hasWork() bool { return s.hasRtx() || s.hasNew() }

// canPull: pulled data can go now.
func (s *sender) canPull() bool { return s.pullCredit > 0 && s.hasWork() }

// canPush: unsolicited data can go now.
func (s *sender) canPush() bool {
	return s.urgN > 0 || (s.pushCredit > 0 && s.hasNew())
}

// queueRtx moves an in-flight packet to the retransmission queue.
func (s *sender) queueRtx(seq uint32) bool {
	d := s.desc(seq)
	if d.state != pktInflight {
		return false
	}
	d.state = pktRtxQueued
	s.rtxMap.set(seq)
	s.rtxN++
	return true
}

// markUrgent lets queued retransmission seq go without waiting for a PULL.
func (s *sender) markUrgent(seq uint32) {
	if s.desc(seq).state == pktRtxQueued && !s.urgMap.has(seq) {
		s.urgMap.set(seq)
		s.urgN++
	}
}

// unqueueRtx takes queued retransmission seq out of the queue (it is being
// sent, or was ACKed meanwhile); the caller sets its new state.
func (s *sender) unqueueRtx(seq uint32) {
	s.rtxMap.clear(seq)
	s.rtxN--
	if s.urgMap.has(seq) {
		s.urgMap.clear(seq)
		s.urgN--
	}
}

// advanceUna slides past acknowledged packets and frees their bytes. It
// returns true if buffer space was freed.
func (s *sender) advanceUna() bool {
	moved := false
	for s.una != s.nxtSeq && s.desc(s.una).state == pktAcked {
		d := s.desc(s.una)
		if d.flags&FlagFIN != 0 {
			s.finAcked = true
		}
		d.state = pktFree
		s.una++
		moved = true
	}
	if !moved {
		return false
	}
	old := s.bufStart
	if s.una == s.nxtSeq {
		s.bufStart = s.nxtOff
	} else {
		s.bufStart = s.desc(s.una).off
	}
	return s.bufStart > old
}

// allAcked: everything sent is acknowledged and nothing is left to send.
func (s *sender) allAcked() bool {
	return s.una == s.nxtSeq && s.nxtOff == s.written && (!s.finQueued || s.finAcked)
}

func (s *sender) noteFeedback(acked bool) {
	// EWMA with gain 1/16 of the fraction of feedback that was an ACK
	const one = 1 << 16
	v := uint32(0)
	if acked {
		v = one
	}
	s.ackFrac = s.ackFrac - s.ackFrac/16 + v/16
	s.fbSamples++
}

// asymmetric: most recent feedback was ACK rather than NACK, so a bounced
// header points at one bad path rather than an incast (paper 3.2.4).
func (s *sender) asymmetric() bool {
	return s.fbSamples >= 8 && s.ackFrac >= (9<<16)/10
}

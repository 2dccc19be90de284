package ndp

// queueCtl queues a control frame for connection c. Overflow drops it.
// With AckHold an ACK is held for c's next PULL instead (ackhold.go), and
// any other frame of c queues the held ACK ahead of itself.
func (e *Endpoint) queueCtl(c *conn, t PacketType, seq, pull uint32, path uint16, code ResetCode) {
	if e.cfg.AckHold > 0 && e.cfg.CoalesceControl {
		if t == TypeAck {
			e.holdAck(c, seq, path)
			return
		}
		e.releaseAck(c)
	}
	e.queueCtlNow(c, t, seq, pull, path, code)
}

// queueCtlNow queues a control frame for connection c, merged into c's
// queued one where CoalesceControl allows. Overflow drops it.
func (e *Endpoint) queueCtlNow(c *conn, t PacketType, seq, pull uint32, path uint16, code ResetCode) {
	coalesce := e.cfg.CoalesceControl && (t == TypeAck || t == TypePull)
	if coalesce && c.ctlPending != 0 && e.mergeCtl(c, t, seq, pull, path) {
		return
	}
	cf := ctlFrame{
		dstMAC: c.remote.MAC, dstIP: c.remote.IP, udpSrc: c.ctlSrc(path),
		typ: t, code: code, prio: c.prio,
		srcPort: c.key.localPort, dstPort: c.key.remotePort, connID: c.key.connID,
		seq: seq, pull: pull, pathID: path, owner: c.idx + 1, ownGen: c.gen,
	}
	if c.prio > 0 {
		cf.flags = FlagPriority
	}
	if !e.ctl.push(&cf) {
		e.stats.ControlDrops++
		return
	}
	if coalesce {
		c.ctlPending = e.ctl.lastID() + 1
	} else {
		// A later ACK or PULL must not merge into a frame ahead of this
		// one: a PULL overtaking a NACK reaches the sender before the
		// retransmission it is meant for is queued, and is spent on
		// nothing (the packet then waits for a stall probe).
		c.ctlPending = 0
	}
}

// queueProbe queues a header-only copy (FlagTrimmed set by the sender) of
// queued retransmission seq. To the receiver it looks like a trimmed
// header: it NACKs and pulls the packet if it lacks it (its PULL was lost)
// and re-ACKs it if it has it (our ACK was lost). 90 bytes, priority-queued
// by switches, no payload wasted.
func (e *Endpoint) queueProbe(c *conn, seq uint32, now Time) {
	s := &c.snd
	d := s.desc(seq)
	d.karn = karnMany // a re-ACK of the probe would time the probe, not a send
	path := c.paths.next(&e.rng, -1, now, &e.stats.PathsExcluded)
	cf := ctlFrame{
		dstMAC: c.remote.MAC, dstIP: c.remote.IP, udpSrc: c.udpSrc(path),
		typ: TypeData, flags: d.flags&(FlagSYN|FlagFIN) | FlagTrimmed, prio: c.prio,
		srcPort: c.key.localPort, dstPort: c.key.remotePort, connID: c.key.connID,
		seq: seq, pathID: path, plen: d.n, off: d.off,
	}
	if s.established {
		cf.flags &^= FlagSYN // as on a resend (sendData)
	}
	if cf.flags&FlagSYN != 0 {
		cf.synOff = uint16(seq - s.isn)
	}
	if c.prio > 0 {
		cf.flags |= FlagPriority
	}
	if !e.ctl.push(&cf) {
		e.stats.ControlDrops++
	}
}

// queueStateless answers frame f without connection state.
func (e *Endpoint) queueStateless(f *Frame, t PacketType, flags Flags, code ResetCode) {
	h := &f.Header
	cf := ctlFrame{
		dstMAC: f.SrcMAC, dstIP: f.SrcIP, udpSrc: f.SrcPort,
		typ: t, flags: flags, code: code, srcPort: h.DstPort, dstPort: h.SrcPort, connID: h.ConnID,
		seq: h.Seq, pathID: h.PathID,
	}
	if !e.ctl.push(&cf) {
		e.stats.ControlDrops++
	}
}

// schedule puts c in the ready queues it qualifies for, and forgets pull
// credit when there is nothing at all to send and none is coming (a PULL
// for no data is spent: data written later is pushed after LAST).
func (e *Endpoint) schedule(c *conn) {
	if c.closed {
		return
	}
	s := &c.snd
	hasRtx := s.hasRtx()
	if s.pullCredit > 0 && !hasRtx && !s.moreComing && s.nxtOff >= s.written && !(s.finQueued && !s.finSent) {
		s.pullCredit = 0
	}
	if s.canPull() && !c.inPullQ {
		c.inPullQ = true
		e.pullQ.push(c.idx)
	}
	if s.canPush() {
		if c.paced {
			if !c.inPacedQ {
				c.inPacedQ = true
				e.pacedQ.push(c.idx)
			}
		} else if !c.inFreeQ {
			c.inFreeQ = true
			e.freeQ.push(c.idx)
		}
	}
}

// HasOutput reports whether PollFrame may have a frame to build: a queued
// control frame or a connection waiting to send. False means PollFrame
// would return 0, so a driver polling in a loop can skip taking a transmit
// buffer. (True does not promise a frame: a queued connection may have
// nothing sendable yet.)
func (e *Endpoint) HasOutput() bool {
	return e.ctl.n > 0 || e.pullQ.n > 0 || e.freeQ.n > 0 || e.pacedQ.n > 0
}

// PollFrame writes the next frame to transmit into b and returns its
// length (0 = nothing to send). b should be at least MaxFrameLen(MTU).
// Order: control frames (ACK/NACK/PULL/RESET), then pulled data
// (retransmissions first, connections round-robin), then unsolicited data
// (first-RTT push, push after LAST, RTO retransmissions, bounced resends,
// stall probes). Unsolicited data of connections that asked for pacing
// (DialOptions.Paced, or FlagPaced on an accepted connection's first
// packet) is returned with pushed = true and is held back while allowPush
// is false; other unsolicited data is not subject to the edge pacer. With
// Config.CoalesceControl a queued plain ACK may leave inside a DATA frame of
// its connection (carryAck), in the ACK's place in the order.
func (e *Endpoint) PollFrame(b []byte, now Time, allowPush bool) (n int, pushed bool) {
	e.now = max(e.now, now)
	if len(b) < HeaderOverhead {
		return 0, false
	}
	if cf, ok := e.ctl.pop(); ok {
		if n, pushed := e.carryAck(b, cf, now, allowPush); n > 0 {
			return n, pushed
		}
		return e.buildCtl(b, cf), false
	}
	if n := e.pollQueue(b, now, &e.pullQ, true); n > 0 {
		return n, false
	}
	if n := e.pollQueue(b, now, &e.freeQ, false); n > 0 {
		return n, false
	}
	if allowPush {
		if n := e.pollQueue(b, now, &e.pacedQ, false); n > 0 {
			return n, true
		}
	} else {
		// while the pacer holds pushes back, still retire closed connections
		for e.pacedQ.n > 0 && e.conns[e.pacedQ.front()].closed {
			c := e.conns[e.pacedQ.pop()]
			c.inPacedQ = false
			if c.released && !c.inPullQ && !c.inFreeQ {
				e.recycle(c)
			}
		}
	}
	return 0, false
}

func (e *Endpoint) inQueueFlag(c *conn, q *connRing) *bool {
	switch q {
	case &e.pullQ:
		return &c.inPullQ
	case &e.freeQ:
		return &c.inFreeQ
	}
	return &c.inPacedQ
}

func (e *Endpoint) pollQueue(b []byte, now Time, q *connRing, pulled bool) int {
	for q.n > 0 {
		c := e.conns[q.front()]
		flag := e.inQueueFlag(c, q)
		ok := !c.closed && ((pulled && c.snd.canPull()) || (!pulled && c.snd.canPush()))
		if !ok {
			q.pop()
			*flag = false
			if c.closed && c.released && !c.inPullQ && !c.inFreeQ && !c.inPacedQ {
				e.recycle(c)
			}
			continue
		}
		n := e.sendData(c, b, now, pulled, nil)
		if n == 0 {
			return 0 // buffer too small: leave the queue as is
		}
		q.pop()
		if (pulled && c.snd.canPull()) || (!pulled && c.snd.canPush()) {
			q.push(c.idx) // round robin
		} else {
			*flag = false
		}
		e.rearm(c)
		return n
	}
	return 0
}

// sendData builds one DATA frame for c into b: a retransmission first if
// one is queued (and the credit allows), else new data.
// With ack, the frame also carries that queued ACK of the peer's packet
// (FlagAck, the acknowledged seq in PullCounter; see carryAck); without,
// it carries c's held ACK when that acknowledges one packet (holdsForAnswer).
func (e *Endpoint) sendData(c *conn, b []byte, now Time, pulled bool, ack *ctlFrame) int {
	s := &c.snd
	room := len(b) - HeaderOverhead
	var seq uint32
	var d *pktDesc
	rseq, rtx := s.peekUrgent()
	if pulled {
		rseq, rtx = s.peekRtx()
	}
	if rtx {
		seq, d = rseq, s.desc(rseq)
		if int(d.n) > room {
			return 0
		}
	} else {
		// new data (hasNew guaranteed by canPull/canPush)
		n := int(min(uint64(e.mss), s.written-s.nxtOff))
		if n > room {
			if room <= 0 {
				return 0
			}
			n = room
		}
		seq = s.nxtSeq
		d = s.desc(seq)
		*d = pktDesc{off: s.nxtOff, n: uint16(n)}
		if !s.established {
			d.flags |= FlagSYN
			d.first = true
			s.firstSent++
		}
		if s.finQueued && s.nxtOff+uint64(n) == s.written {
			d.flags |= FlagFIN
			s.finSent = true
		}
		s.nxtSeq++
		s.nxtOff += uint64(n)
	}
	avoid, avoid2 := -1, -1
	if rtx {
		s.unqueueRtx(seq)
		avoid = int(d.path)
		if d.rtoLost && (d.karn == karnTwo || d.karn == karnFirst) {
			// the RTO resends it again: an ACK of the first copy must
			// still be told from the others (noteResend)
			avoid2 = int(d.firstPath)
		}
		e.stats.Retransmits++
	}
	if pulled {
		s.pullCredit--
		e.stats.PulledOut++
	} else {
		if !rtx {
			s.pushCredit--
		}
		e.stats.PushedOut++
	}
	path := c.paths.next2(&e.rng, avoid, avoid2, now, &e.stats.PathsExcluded)
	if rtx {
		d.noteResend(now, path)
	}
	d.state, d.sentAt, d.path = pktInflight, now, path
	flags := d.flags & (FlagSYN | FlagFIN)
	if s.established {
		// a resend of a first-RTT packet: the peer holds the connection
		// (or remembers it in time-wait), and a copy that outlived that
		// must not open it again
		flags &^= FlagSYN
	}
	if !s.hasRtx() && !s.moreComing && !(s.nxtOff < s.written || (s.finQueued && !s.finSent)) {
		flags |= FlagLast
		s.lastSent = true
	}
	d.flags = flags
	if c.prio > 0 {
		flags |= FlagPriority
	}
	if c.paced && !pulled {
		flags |= FlagPaced
	}
	if pulled {
		flags |= FlagPulled
	}
	var held ctlFrame
	if ack == nil && c.ackHeld && c.ackMore == 0 {
		// A held ACK of one packet rides in this frame (holdsForAnswer);
		// the caller rearms c's timer.
		held.seq, held.pathID = c.ackSeq, c.ackPath
		ack = &held
		c.ackHeld = false
	}
	hd := Header{
		Type: TypeData, Flags: flags, SrcPort: c.key.localPort, DstPort: c.key.remotePort,
		ConnID: c.key.connID, Seq: seq, PayloadLen: d.n, PathID: path, Priority: c.prio,
		Offset: d.off,
	}
	if ack != nil {
		hd.Flags |= FlagAck
		hd.PullCounter = ack.seq
		if ack.pathID < 0xFF {
			// the acknowledged packet's path, echoed as an ACK frame
			// would: the peer can then tell which copy arrived
			hd.AckPath = uint8(ack.pathID + 1)
		}
		e.stats.AcksOut++
		e.stats.ControlMerged++
	}
	if flags&FlagSYN != 0 {
		hd.SynOffset = uint16(seq - s.isn)
		hd.FlowSize = uint64(max(c.flowSize, 0))
		if c.deadline != 0 {
			us := (c.deadline - now) / 1000
			hd.DeadlineUS = uint32(max(1, min(us, 1<<32-1)))
		}
	}
	n := int(d.n)
	s.copyOut(b[HeaderOverhead:HeaderOverhead+n], d.off)
	writeHeaders(b, &c.remote.MAC, &e.cfg.LocalMAC, &e.cfg.LocalIP, &c.remote.IP, c.udpSrc(path), e.cfg.UDPPort, &hd, n, e.cfg.ZeroPayload)
	if e.commodity.trimMask != 0 {
		if n > 0 {
			setDSCP(b, e.cfg.Commodity.DataDSCP)
		} else {
			setDSCP(b, e.cfg.Commodity.ControlDSCP)
		}
	}
	if s.rtoAt == 0 {
		s.rtoAt = now + e.rto(c)
	}
	s.lastActivity = now
	e.stats.FramesOut++
	e.stats.DataOut++
	e.stats.BytesOut += uint64(n)
	return HeaderOverhead + n
}

func (e *Endpoint) buildCtl(b []byte, cf *ctlFrame) int {
	hd := Header{
		Type: cf.typ, Flags: cf.flags, SrcPort: cf.srcPort, DstPort: cf.dstPort, ConnID: cf.connID,
		Seq: cf.seq, PullCounter: cf.pull, PathID: cf.pathID, Priority: cf.prio, Code: cf.code,
		SynOffset: cf.synOff, PayloadLen: cf.plen, Offset: cf.off,
	}
	writeHeaders(b, &cf.dstMAC, &e.cfg.LocalMAC, &e.cfg.LocalIP, &cf.dstIP, cf.udpSrc, e.cfg.UDPPort, &hd, 0, false)
	if e.commodity.trimMask != 0 {
		setDSCP(b, e.cfg.Commodity.ControlDSCP)
	}
	e.stats.FramesOut++
	switch cf.typ {
	case TypeAck:
		e.stats.AcksOut++
		if cf.flags&FlagPull != 0 {
			e.stats.PullsOut++
		}
	case TypeNack:
		e.stats.NacksOut++
	case TypePull:
		e.stats.PullsOut++
	case TypeReset:
		e.stats.ResetsOut++
	}
	return HeaderOverhead
}

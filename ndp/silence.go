package ndp

// Silence: probing a peer that went quiet, resuming when it answers, and the
// user timeout.
//
// A connection is waiting when it expects something from its peer: its
// sender has data unacknowledged or queued (or a FIN not yet acknowledged),
// or its receiver is mid-stream (the newest packet it has did not carry
// LAST, or packets before it are missing). A connection that is not
// waiting but whose peer's stream has not ended (no FIN yet) is idle: the
// peer may still send, or may have sent data that was lost with everything
// after it (a receiver that saw LAST cannot tell). A connection whose
// peer's stream ended and that has nothing outstanding expects nothing and
// has no liveness timer.
//
// quietSince is the start of the current silence: the last frame heard
// from the peer, or the moment the connection last went from idle to
// waiting. Once a waiting connection has heard nothing for probeAfter
// (about four of its longest RTOs, at least 1s, at most half the user timeout), or an idle one for a
// third of Config.UserTimeout (a keepalive every 10s with defaults, that a
// live peer answers: an idle connection is never failed for being idle,
// only for a peer that does not answer), it is probing: the RTO
// no longer resends its window (lost packets wait in the retransmission
// queue for a PULL), the stall probe stops, and one keepalive goes out per
// probe interval instead, the interval doubling from min(probeAfter,
// Config.MaxProbeInterval) up to Config.MaxProbeInterval. The keepalive is a PULL with FlagProbe carrying
// the connection's current pull counter (so it also restores PULLs lost
// meanwhile); a peer that holds the connection answers with an ACK with
// FlagProbe, one that does not answers with a RESET (handleNoConn), which
// fails the connection with ErrConnReset. A connection whose sender is not
// established sends its oldest unacknowledged first-RTT packet instead
// (queueKeepalive), which can still open the connection at its peer.
//
// The first frame heard from the peer ends probing (heard): the sender
// resends up to IW of its queued retransmissions at once, unsolicited, and
// may push up to IW new packets, as in a connection's first RTT, so the
// peer's arrivals bring PULLs back at full rate instead of one packet per
// round trip.
//
// A waiting or idle connection that has heard nothing for Config.UserTimeout fails
// with ErrTimeout and sends a RESET (which may be lost: the peer finds out
// by its own timer or its own probe). So each end learns within
// UserTimeout of the last frame it heard from the other that the other is
// gone or gave up, and a side whose peer gave up while the link was down
// gets a RESET in answer to its first keepalive after the link returns.

// waiting reports whether c expects something from its peer.
func (e *Endpoint) waiting(c *conn) bool {
	if c.closed {
		return false
	}
	s := &c.snd
	if s.una != s.nxtSeq || s.hasWork() || (s.finQueued && !s.finAcked) {
		return true
	}
	r := &c.rcv
	return r.synced && !c.readDone() && (!r.hiLast || r.base != r.hiSeq+1 || r.nTrim > 0)
}

// heard: a frame of c arrived from its peer.
func (e *Endpoint) heard(c *conn, now Time) {
	c.quietSince = now
	if c.probing {
		e.resume(c)
	}
}

// resume ends probing: the peer answered.
func (e *Endpoint) resume(c *conn) {
	c.probing = false
	c.probes = 0
	e.stats.SilenceResumes++
	s := &c.snd
	n := 0
	for seq := s.una; seq != s.nxtSeq && n < e.cfg.IW; seq++ {
		if s.desc(seq).state == pktRtxQueued {
			s.markUrgent(seq)
			n++
		}
	}
	if n < e.cfg.IW && s.hasNew() {
		s.pushCredit = max(s.pushCredit, e.cfg.IW-n)
	}
	e.schedule(c)
	e.rearm(c)
}

// probeAfter is how long a waiting connection hears nothing before it
// starts probing.
func (e *Endpoint) probeAfter() Time {
	rto := e.cfg.MaxRTO
	if e.cfg.FixedRTO {
		rto = e.cfg.RTO
	}
	d := max(4*Time(max(rto, e.cfg.StallTimeout)), minProbeAfter)
	return min(d, Time(e.cfg.UserTimeout)/2)
}

// probeInterval is the wait after c's k-th keepalive (k from 1).
func (e *Endpoint) probeInterval(k uint8) Time {
	limit := Time(e.cfg.MaxProbeInterval)
	return backedOff(min(e.probeAfter(), limit), k-1, limit)
}

// quietLimit is how long c may hear nothing from its peer before it probes:
// probeAfter while waiting, a third of the user timeout while only its
// peer's stream is unfinished, and 0 (never) when c expects nothing at all.
func (e *Endpoint) quietLimit(c *conn) Time {
	switch {
	case c.closed:
		return 0
	case e.waiting(c):
		return e.probeAfter()
	case !c.readDone():
		return Time(e.cfg.UserTimeout) / 3
	}
	return 0
}

// silenceDeadline is when c's silence next needs attention: its user
// timeout, its next keepalive or the start of probing (0: none).
func (e *Endpoint) silenceDeadline(c *conn) Time {
	limit := e.quietLimit(c)
	if limit == 0 {
		return 0
	}
	t := c.quietSince + Time(e.cfg.UserTimeout)
	if c.probing {
		return min(t, c.probeAt)
	}
	return min(t, c.quietSince+limit)
}

// silenceTimer runs c's silence deadlines due at now; it reports whether it
// closed c.
func (e *Endpoint) silenceTimer(c *conn, now Time) bool {
	limit := e.quietLimit(c)
	if limit == 0 {
		c.probing, c.probes = false, 0
		return false
	}
	if now >= c.quietSince+Time(e.cfg.UserTimeout) {
		e.stats.UserTimeouts++
		e.closeConn(c, ErrTimeout, now, true, ResetTimeout)
		return true
	}
	if !c.probing {
		if now < c.quietSince+limit {
			return false
		}
		c.probing = true
		// hold the window: lost packets wait for a PULL, not for the RTO
		s := &c.snd
		for seq, ok := s.peekUrgent(); ok; seq, ok = s.peekUrgent() {
			s.urgMap.clear(seq)
			s.urgN--
		}
		c.probeAt = now
	}
	if now >= c.probeAt {
		e.queueKeepalive(c)
		if c.probes < 255 {
			c.probes++
		}
		c.probeAt = now + e.probeInterval(c.probes)
	}
	return false
}

// queueKeepalive queues c's keepalive: a PULL with FlagProbe carrying c's
// pull counter, or, while c's sender has not heard that its peer holds the
// connection (not established: its packets carry SYN), a resend of its
// oldest unacknowledged first-RTT packet. A PULL cannot open a connection:
// a peer that lost every first-RTT packet (under load, for longer than
// probeAfter) could only answer it with a RESET, failing a connection
// whose peer was merely slow. The first-RTT packet opens the connection
// if the peer listens, is ACKed by a peer that holds it or remembers it
// in time-wait, and is refused otherwise.
func (e *Endpoint) queueKeepalive(c *conn) {
	e.stats.SilenceProbes++
	s := &c.snd
	if !s.established {
		for seq := s.una; seq != s.nxtSeq; seq++ {
			d := s.desc(seq)
			if d.flags&FlagSYN == 0 || d.state == pktAcked {
				continue
			}
			s.queueRtx(seq) // in flight: resent now, not at its RTO
			s.markUrgent(seq)
			return
		}
	}
	e.queueProbeCtl(c, TypePull, c.rcv.pullCounter)
}

// queueProbeCtl queues a keepalive or its answer. It is never merged with
// or carried by other frames (owner 0), so the peer always gets it whole.
func (e *Endpoint) queueProbeCtl(c *conn, t PacketType, pull uint32) {
	path := uint16(e.rng.next() % uint64(e.cfg.Paths))
	cf := ctlFrame{
		dstMAC: c.remote.MAC, dstIP: c.remote.IP, udpSrc: c.ctlSrc(path),
		typ: t, flags: FlagProbe, prio: c.prio,
		srcPort: c.key.localPort, dstPort: c.key.remotePort, connID: c.key.connID,
		pull: pull, pathID: path,
	}
	if c.prio > 0 {
		cf.flags |= FlagPriority
	}
	if !e.ctl.push(&cf) {
		e.stats.ControlDrops++
	}
}

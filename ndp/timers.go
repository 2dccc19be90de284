package ndp

// Connection timers: lazy RTO, stall probe, and time-wait expiry.

// NextTimer returns when HandleTimers should next be called.
func (e *Endpoint) NextTimer() (Time, bool) {
	if len(e.dirty) > 0 { // a spinning poll's common case: none
		e.flushTimers()
	}
	t, ok := e.tw.next()
	if c, cok := e.timers.min(); cok && (!ok || c.timerAt < t) {
		t, ok = c.timerAt, true
	}
	if len(e.closing) > 0 && (!ok || e.closingSince < t) {
		// pending closes (checkDone): due at once
		t, ok = e.closingSince, true
	}
	return t, ok
}

// HandleTimers runs RTO, stall-probe, silence (keepalive, user timeout) and
// time-wait expiry due at now.
func (e *Endpoint) HandleTimers(now Time) {
	e.now = max(e.now, now)
	if len(e.closing) > 0 {
		e.finishCloses(now)
	}
	e.tw.expire(now)
	for {
		if len(e.dirty) > 0 {
			e.flushTimers() // connTimer's changes place c again
		}
		c, ok := e.timers.min()
		if !ok || c.timerAt > now {
			return
		}
		e.connTimer(c, now)
	}
}

// idleTrimBatch bounds HandleIdle's work per call: time-wait entries trimmed.
const idleTrimBatch = 2

// HandleIdle does work that can wait for a moment with nothing to receive;
// the host calls it from a poll that received no frame, so the work falls
// in a wait rather than between a frame's arrival and its answer:
//   - While time-wait holds more than 15/16 of Config.MaxTimeWait it evicts
//     the oldest entries (at most idleTrimBatch a call, counted in
//     Stats.TimeWaitEvicted unless expired), so a connection that closes
//     finds room in the ring instead of evicting the oldest entry itself
//     (a probe of a long-unused table slot: a cache miss).
//   - It resets the pooled connection the next Dial or accept takes (the
//     pool's top; its 2.4 KB of state cleared), so that one starts clean.
//     A connection released after the last idle call lies on top, stale:
//     a Dial or accept then takes the clean one under it (allocConn), so a
//     client that closes and dials back to back never resets on its way.
//   - Its first call tells the Endpoint that the host polls: from then on
//     a connection that finishes cleanly is closed at the host's next timer
//     check (NextTimer reports it due at once) or idle call, not inside the
//     HandleFrame that finished it (checkDone); an idle call closes those
//     still pending.
//
// Without HandleIdle calls (the simulator) all three happen where they are
// needed: time-wait evicts at close once full, a stale pooled connection
// is reset when it is taken, and a finished connection closes at once.
func (e *Endpoint) HandleIdle(now Time) {
	e.deferCloses = true
	if len(e.closing) > 0 {
		e.now = max(e.now, now)
		e.finishCloses(e.now)
	}
	if keep := e.cfg.MaxTimeWait - e.cfg.MaxTimeWait/16; e.tw.n > keep {
		e.now = max(e.now, now)
		e.stats.TimeWaitEvicted += uint64(e.tw.trim(e.now, keep, idleTrimBatch))
	}
	if n := len(e.pool); n > 0 && e.pool[n-1].stale {
		e.pool[n-1].reset()
	}
}

func (e *Endpoint) connTimer(c *conn, now Time) {
	if at := e.ackHoldDeadline(c); at != 0 && now >= at {
		e.releaseAck(c)
	}
	if e.silenceTimer(c, now) {
		return
	}
	s := &c.snd
	rto := e.rto(c)
	if s.rtoAt != 0 && now >= s.rtoAt {
		// A packet is silent when nothing sent at or after it is known to
		// have arrived (sentAt >= rackSent): of the silent packets due, only
		// the oldest is declared lost; the rest wait (holdUntil). See
		// sender.rackSent.
		//
		// The same holds across a host's connections (the host's rule):
		// a silent packet is host-silent when nothing sent to that
		// address on any connection at or after it (beyond hostGrace,
		// below) is known to have arrived (the host's rackSent), and of
		// the host-silent packets due, one per RTO is declared lost, on
		// whichever connection's timer runs first; the rest wait until
		// the host's holdUntil or until a copy sent at or after its
		// heldAt is ACKed (rttSeeds.arrived). A
		// descheduled host fired once per connection with a packet out
		// before (8 persistent connections: 8 fires per stall). A
		// connection whose held packets a later arrival proves lost
		// fires them at its next timer, up to one RTO later than its own
		// rule would (the other connections' timers are not visited).
		silentRule := !e.cfg.FixedRTO
		var host *rttDest
		if silentRule {
			host = e.seeds.host(c.key.remoteIP)
		}
		// A copy sent less than AckHold after a packet may be ACKed
		// while the packet's ACK is still held for its answer
		// (ackhold.go): only an arrival sent later proves the host
		// processed past the packet's hold.
		hostGrace := Time(0)
		if e.cfg.CoalesceControl {
			hostGrace = Time(e.cfg.AckHold)
		}
		lost, resentSilent, holding, hostFired := 0, false, false, false
		earliest := Time(-1) // the next deadline
		for seq := s.una; seq != s.nxtSeq; seq++ {
			d := s.desc(seq)
			if d.state != pktInflight {
				continue
			}
			at := d.sentAt + rto
			silent := silentRule && d.sentAt >= s.rackSent
			hostSilent := silent && host != nil && d.sentAt+hostGrace >= host.rackSent
			if silent {
				at = max(at, s.holdUntil)
			}
			if hostSilent {
				at = max(at, host.holdUntil)
			}
			if at > now {
				if earliest < 0 || at < earliest {
					earliest = at
				}
				continue
			}
			if silent && resentSilent {
				holding = true
				continue
			}
			d.rtoLost = true
			s.queueRtx(seq)
			if !c.probing {
				// probing: the packet waits for a PULL; the silence
				// is no path's fault
				s.markUrgent(seq)
				if !silent {
					c.paths.loss(d.path) // a later packet took another path and arrived
				}
			}
			lost++
			resentSilent = resentSilent || silent
			hostFired = hostFired || hostSilent
		}
		if lost > 0 {
			e.stats.RTOFires += uint64(lost)
			e.timeoutRound(c, now)
		}
		if hostFired {
			// the host's other silent packets wait one more (backed-off) RTO
			host.holdUntil, host.heldAt = now+e.rto(c), now
		}
		if holding {
			// the rest of the silent flight waits one more (backed-off)
			// RTO, or until the resend is ACKed (sndAck)
			s.holdUntil, s.heldAt = now+e.rto(c), now
			if earliest < 0 || s.holdUntil < earliest {
				earliest = s.holdUntil
			}
		}
		s.rtoAt = 0
		if earliest >= 0 {
			s.rtoAt = earliest
		}
	}
	if !c.probing && e.stalled(c) && now >= s.lastActivity+e.stallTimeout(c) {
		// Work queued, no credit, no word from the peer: probe. A queued
		// retransmission is probed with a header-only copy (the peer
		// pulls it if it lacks it, re-ACKs it if it has it); new data
		// blocked by lost PULLs goes out as one unsolicited packet.
		if seq, ok := s.peekRtx(); ok {
			e.queueProbe(c, seq, now)
			e.timeoutRound(c, now)
		} else {
			s.pushCredit++
		}
		s.lastActivity = now
		e.stats.StallProbes++
	}
	e.schedule(c)
	e.rearm(c)
}

// timeoutRound counts one more round of timeouts without word from the peer:
// it doubles c's RTO and stall interval (backoff, undone by the next valid RTT
// sample) unless FixedRTO. A round is at most one per current RTO: a window of
// packets sent microseconds apart expires over many timer calls, and those are
// one silent RTO of the peer, not many. Giving up is not counted in rounds but
// in time: Config.UserTimeout (silence.go).
func (e *Endpoint) timeoutRound(c *conn, now Time) {
	s := &c.snd
	if s.rtoStreak > 0 && now < s.roundAt+e.rto(c) {
		return
	}
	s.rtoStreak++
	s.roundAt = now
	if !e.cfg.FixedRTO && s.rtt.backoff < maxBackoff {
		s.rtt.backoff++
		e.stats.RTOBackoffs++
	}
}

// stalled: the sender has something to send but no credit to send it with.
func (e *Endpoint) stalled(c *conn) bool {
	s := &c.snd
	return !c.closed && (s.hasRtx() || s.hasNew()) && !s.canPull() && !s.canPush()
}

// rearm marks c's timer for recomputation (rearmNow) before the timer heap
// is next read: NextTimer and HandleTimers are its only readers. One
// frame, call or built packet changes a connection's deadlines several
// times (a one-packet request and its FIN: the written data, the FIN, the
// packet sent; a response: its carried ACK, the held ACK of its data, the
// release of that ACK, the close), and each recomputation was 60-80 ns of
// the frame's critical path; now the deadline is computed once, from the
// state the last change left, and for what an API call sent only after
// its transmit kick (the poll that follows it reads NextTimer).
func (e *Endpoint) rearm(c *conn) {
	if !c.timerDirty {
		c.timerDirty = true
		e.dirty = append(e.dirty, c) // within capacity: each conn at most once
	}
}

// flushTimers recomputes the timers rearm marked, of the connections still
// holding their slots (a recycled or pooled one has no timer).
func (e *Endpoint) flushTimers() {
	for i, c := range e.dirty {
		e.dirty[i] = nil
		c.timerDirty = false
		if int(c.idx) < len(e.conns) && e.conns[c.idx] == c {
			e.rearmNow(c)
		}
	}
	e.dirty = e.dirty[:0]
}

// rearmNow recomputes c's timer: the RTO deadline, the stall deadline, the
// silence deadline or a held ACK's (AckHold), whichever is first.
func (e *Endpoint) rearmNow(c *conn) {
	if c.closed { // closeConn took it out of the heap
		if c.timerAt != 0 || c.heapIdx >= 0 {
			c.timerAt = 0
			e.timers.set(c)
		}
		return
	}
	s := &c.snd
	t := s.rtoAt
	if !c.probing && e.stalled(c) {
		st := s.lastActivity + e.stallTimeout(c)
		if t == 0 || st < t {
			t = st
		}
	}
	if st := e.silenceDeadline(c); st != 0 && (t == 0 || st < t) {
		t = st
	}
	if at := e.ackHoldDeadline(c); at != 0 && (t == 0 || at < t) {
		t = at
	}
	if t != c.timerAt || (t != 0 && c.heapIdx < 0) {
		c.timerAt = t
		e.timers.set(c)
	}
}

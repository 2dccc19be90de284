package ndp

import "encoding/binary"

var errWrongDst = &ParseError{Err: ErrNotNDP, Field: "udp.dst_port or ipv4.dst (not this endpoint)", Offset: -1}

// HandleFrame processes one received frame. Invalid frames are counted and
// dropped and the reason returned (a *ParseError for malformed input,
// ErrUnknownConn or ErrTimeWait for frames that match no connection). The
// frame buffer is not retained.
func (e *Endpoint) HandleFrame(b []byte, now Time) error {
	e.now = max(e.now, now)
	e.stats.FramesIn++
	f := &e.f
	if err := parseFrame(b, f, &e.commodity); err != nil {
		e.stats.Malformed++
		return err
	}
	if f.DstPort != e.cfg.UDPPort || f.DstIP != e.cfg.LocalIP {
		e.stats.WrongPort++
		return errWrongDst
	}
	h := &f.Header
	if h.Flags&FlagBounced != 0 {
		return e.handleBounced(f, now)
	}
	key := connKey{remoteIP: binary.BigEndian.Uint32(f.SrcIP[:]), remotePort: h.SrcPort, localPort: h.DstPort, connID: h.ConnID}
	idx, ok := e.table.get(key)
	if !ok || idx < 0 {
		return e.handleNoConn(f, key, idx, ok, now)
	}
	c := e.conns[idx]
	e.heard(c, now)
	if c.dialer && h.Type != TypeReset {
		// Whatever the listener sends about this connection shows that
		// it opened it (its receiver synced on our SYN): stop SYN.
		c.snd.established = true
	}
	if h.Flags&FlagProbe != 0 {
		e.handleProbe(c, h, now)
	} else {
		e.dispatch(c, f, now)
	}
	if c.timerAt == 0 && !c.closed {
		// a receiver's silence timer (silence.go): senders arm theirs
		e.rearm(c)
	}
	return nil
}

// dispatch handles a frame of connection c by type.
func (e *Endpoint) dispatch(c *conn, f *Frame, now Time) {
	h := &f.Header
	switch h.Type {
	case TypeData:
		if h.Flags&FlagAck != 0 && !e.carriedAck(c, h, now) {
			return
		}
		e.rcvData(c, f, now)
	case TypeAck:
		e.stats.AcksIn++
		e.handleAck(c, h, now)
	case TypeNack:
		e.stats.NacksIn++
		e.sndNack(c, h, now)
	case TypePull:
		e.stats.PullsIn++
		e.sndPull(c, h, now)
	case TypeReset:
		e.stats.ResetsIn++
		e.closeConn(c, h.Code.Err(), now, false, h.Code)
	}
}

// handleProbe: a keepalive (PULL with FlagProbe: a re-PULL with the peer's
// current pull counter, answered with an ACK with FlagProbe) or its answer
// (heard already). See silence.go.
func (e *Endpoint) handleProbe(c *conn, h *Header, now Time) {
	if h.Type != TypePull || c.closed {
		return
	}
	e.stats.PullsIn++
	e.queueProbeCtl(c, TypeAck, 0)
	// A keepalive proves the peer alive, not that its receiver has our
	// stream: a dialer probes before it has heard a byte of the response,
	// so our first packets keep SYN until a real ACK, NACK or PULL.
	e.alive(c, now)
	e.pulled(c, h)
}

// handleNoConn answers frames for connections not in the table:
//   - time-wait (at-most-once): clean entry re-ACKs DATA, aborted entry
//     answers DATA and PULL with RESET; nothing is ever delivered.
//   - DATA with SYN to a listened port opens a connection (whichever
//     first-RTT packet arrives first).
//   - DATA with SYN to a port nobody listens on (or a full table): RESET
//     refused, so the dialer fails fast with ErrConnRefused.
//   - DATA without SYN, or PULL: RESET (the peer holds state we do not).
//   - ACK, NACK, RESET: ignored (never answer a RESET).
//
// found and v are what the table holds for key: a time-wait entry (v < 0)
// when found.
func (e *Endpoint) handleNoConn(f *Frame, key connKey, v int32, found bool, now Time) error {
	h := &f.Header
	if found {
		tw := e.tw.entry(v)
		e.stats.TimeWaitRejects++
		switch {
		case tw.kind == twAborted && (h.Type == TypeData || h.Type == TypePull):
			e.queueStateless(f, TypeReset, 0, tw.code)
		case tw.kind == twClosed && h.Type == TypeData:
			// we closed only after receiving everything: re-ACK (also
			// trimmed copies and stall probes)
			e.queueStateless(f, TypeAck, 0, 0)
		case tw.kind == twClosed && h.Type == TypePull && h.Flags&FlagProbe != 0:
			// a keepalive: the prober lost our last ACKs. Answer it as
			// the connection would; it resumes and resends what it has
			// queued, which we re-ACK.
			e.queueStateless(f, TypeAck, FlagProbe, 0)
		}
		// The peer is still sending: keep its key for another TimeWait.
		e.tw.refresh(tw, now+Time(e.cfg.TimeWait))
		return ErrTimeWait
	}
	switch h.Type {
	case TypeData:
		if h.Flags&FlagSYN != 0 {
			if e.isListening(h.DstPort) {
				if err := e.accept(f, key, now); err == nil {
					return nil
				}
			}
			e.stats.Refused++
			e.queueStateless(f, TypeReset, 0, ResetRefused)
			return ErrUnknownConn
		}
		e.queueStateless(f, TypeReset, 0, ResetAbort)
	case TypePull:
		e.queueStateless(f, TypeReset, 0, ResetAbort)
	}
	e.stats.UnknownConn++
	return ErrUnknownConn
}

// accept opens a connection from a first-RTT packet and processes it.
func (e *Endpoint) accept(f *Frame, key connKey, now Time) error {
	c, err := e.allocConn()
	if err != nil {
		return err
	}
	h := &f.Header
	c.key = key
	c.remote = Addr{MAC: f.SrcMAC, IP: f.SrcIP, Port: h.SrcPort}
	c.prio = h.Priority
	c.flowSize = int64(h.FlowSize)
	if h.DeadlineUS != 0 {
		c.deadline = now + Time(h.DeadlineUS)*1000
	}
	c.paced = h.Flags&FlagPaced != 0
	c.snd.start(uint32(e.rng.next()), e.cfg.IW)
	c.snd.lastActivity = now
	c.quietSince = now
	e.seedRTT(c, now)
	c.rcv.sync(h.Seq - uint32(h.SynOffset))
	e.table.put(key, c.idx)
	c.inTable = true
	e.stats.ConnsOpened++
	e.events.push(evEntry{kind: EventAccepted, idx: c.idx, gen: c.gen})
	e.rcvData(c, f, now)
	if c.timerAt == 0 && !c.closed {
		e.rearm(c)
	}
	return nil
}

// rcvData is the receiver's handling of DATA and trimmed headers.
func (e *Endpoint) rcvData(c *conn, f *Frame, now Time) {
	h := &f.Header
	r := &c.rcv
	trimmed := h.Flags&FlagTrimmed != 0
	c.notePeerEntropy(f)
	if !r.synced {
		if h.Flags&FlagSYN == 0 {
			e.stats.OutOfWindow++
			return
		}
		r.sync(h.Seq - uint32(h.SynOffset))
	}
	if c.pullsOut > 0 {
		e.pullAnswered(c, h)
	}
	switch r.classify(h.Seq) {
	case seqOutOfWindow:
		e.stats.OutOfWindow++
		return
	case seqDup:
		e.stats.DuplicatesIn++
		e.queueCtl(c, TypeAck, h.Seq, 0, h.PathID, 0)
		return
	}
	r.noteSeq(h.Seq, h.Flags)
	if trimmed {
		e.stats.TrimmedIn++
		e.queueCtl(c, TypeNack, h.Seq, 0, h.PathID, 0)
		// A pulled packet trimmed again earns a pull as the first trim did,
		// or each re-trim takes one pull out of the loop for good; one the
		// buffer refused does not (docs/decisions.md).
		if r.markTrimmed(h.Seq) || h.Flags&FlagPulled != 0 && !r.noBuf.has(h.Seq) {
			e.addPulls(c, 1)
		} else if c.pullsPending+c.pullsHanded == 0 {
			// a repeated header (e.g. the sender's stall probe) while no
			// pull is queued for this sender: the PULLs counted out were
			// lost or found nothing, so they hold no room; re-pull (with
			// the pulls owed, if flow control held some back)
			c.pullsOut = 0
			if r.owedPulls == 0 {
				e.addPulls(c, 1)
			} else {
				e.flushPulls(c)
			}
		} else {
			e.flushPulls(c)
		}
		return
	}
	n := len(f.Payload)
	if !r.fits(h.Offset, n) || (r.finKnown && h.Offset+uint64(n) > r.finOff) || c.closed {
		// no room (flow control): behave as if trimmed, pull it later
		e.stats.NoBufferNacks++
		e.queueCtl(c, TypeNack, h.Seq, 0, h.PathID, 0)
		if r.markNoBuf(h.Seq) {
			r.owedPulls++ // handed out when the application reads
		}
		return
	}
	e.stats.DataIn++
	e.stats.BytesIn += uint64(n)
	switch {
	case h.Flags&FlagPulled == 0:
		// Pushed, not pulled: it took link time the pacer did not schedule.
		e.unpulledBytes += n + HeaderOverhead + WireOverhead
		if hc := c.handle(); h.Flags&FlagSYN == 0 || e.unpulledFrom != 0 && e.unpulledFrom != hc {
			e.unpulledMixed = true // not only one connection's first-RTT window
		} else {
			e.unpulledFrom = hc
		}
	case n < e.mss:
		// This packet used one slot of the host's pull pacer, which spaces PULLs
		// for full frames: remember how much of the slot it left idle. Counted
		// only for new in-window data of a live connection, so duplicates and
		// strangers cannot speed the pacer up (nor slow it down).
		e.pullShortfall += e.mss - n
	}
	grew := r.store(h.Offset, f.Payload)
	r.markGot(h.Seq)
	e.queueCtl(c, TypeAck, h.Seq, 0, h.PathID, 0)
	if h.Flags&FlagFIN != 0 && !r.finKnown {
		r.finKnown = true
		r.finOff = h.Offset + uint64(n)
	}
	if h.Flags&FlagLast != 0 {
		// the sender has nothing more right now: drop queued pulls, but
		// keep one for every retransmission still owed; the ACK leaves
		// now unless it waits for the answer (holdsForAnswer)
		if !e.holdsForAnswer(c, h) {
			e.releaseAck(c)
		}
		e.forgetPulls(c)
		e.addPulls(c, r.trimmedCount())
	} else {
		e.addPulls(c, 1)
	}
	if grew || c.readDone() {
		e.notifyReadable(c)
	}
	e.checkDone(c, now)
}

// pullAnswered counts DATA (or its trimmed header) h against c's released
// pulls (pullsOut, flushPulls): a pulled packet answers one, whatever
// becomes of it here. So does an older packet sent unsolicited: the RTO's
// resend of a packet that may have been pulled and lost on the way, whose
// pull would otherwise stay counted. New data pushed mid-stream is the
// sender's stall probe: it had no pull credit left, so none of c's pulls is
// still to be answered. The count errs low, never high for long: a count
// too high would hold pulls back for room that is free.
func (e *Endpoint) pullAnswered(c *conn, h *Header) {
	r := &c.rcv
	switch {
	case h.Flags&FlagPulled != 0:
		c.pullsOut--
	case h.Flags&FlagSYN != 0:
	case r.hiSet && int32(h.Seq-r.hiSeq) <= 0:
		c.pullsOut--
	default:
		c.pullsOut = 0
	}
}

// feedback: any ACK/NACK/PULL proves the peer has state and is alive.
func (e *Endpoint) feedback(c *conn, now Time) {
	c.snd.established = true
	e.alive(c, now)
}

// alive: the peer answered (feedback, or a keepalive, which does not show
// that the peer's receiver has our stream).
func (e *Endpoint) alive(c *conn, now Time) {
	c.snd.rtoStreak = 0
	c.snd.lastActivity = now
}

func (e *Endpoint) sndAck(c *conn, h *Header, now Time) {
	s := &c.snd
	e.feedback(c, now)
	if s.inWindow(h.Seq) {
		d := s.desc(h.Seq)
		if d.state == pktInflight || d.state == pktRtxQueued {
			// Karn's rule, told apart by path (pktDesc.rttSample, rtt.go)
			if m, spurious, ok := d.rttSample(h, now); ok {
				if at := now - m; m >= 0 && at > s.rackSent {
					s.rackSent = at
					if s.holdUntil != 0 && at >= s.heldAt {
						// the resend (or a later copy) arrived: the
						// held packets, older, are lost now
						s.holdUntil = 0
						if s.rtoAt != 0 {
							s.rtoAt = min(s.rtoAt, now)
						}
					}
				}
				e.rttSample(c, m, now, spurious)
				if m >= 0 {
					e.seeds.arrived(c.key.remoteIP, now-m)
				}
				if spurious {
					e.stats.SpuriousRTOs++
				}
			}
		}
		if d.state == pktInflight || d.state == pktRtxQueued {
			if d.state == pktRtxQueued {
				s.unqueueRtx(h.Seq)
			}
			d.state = pktAcked
			c.paths.ack(h.PathID)
			s.noteFeedback(true)
			if d.flags&FlagLast != 0 {
				s.pullsExpected = 0 // the receiver dropped our pulls
			} else {
				s.pullsExpected++
			}
			if s.advanceUna() {
				e.notifyWritable(c)
			}
			if s.una == s.nxtSeq {
				s.rtoAt = 0
			}
		}
	}
	e.schedule(c)
	e.checkDone(c, now)
	e.rearm(c)
}

func (e *Endpoint) sndNack(c *conn, h *Header, now Time) {
	s := &c.snd
	e.feedback(c, now)
	if s.inWindow(h.Seq) && s.queueRtx(h.Seq) {
		c.paths.nack(h.PathID)
		s.noteFeedback(false)
		s.pullsExpected++
	}
	// a NACK queues the retransmission; a PULL will send it
	e.schedule(c)
	e.rearm(c)
}

func (e *Endpoint) sndPull(c *conn, h *Header, now Time) {
	e.feedback(c, now)
	e.pulled(c, h)
}

// pulled takes the credit of h's pull counter and schedules c.
func (e *Endpoint) pulled(c *conn, h *Header) {
	s := &c.snd
	if d := int32(h.PullCounter - s.lastPull); d > 0 {
		s.lastPull = h.PullCounter
		s.pullCredit = min(s.pullCredit+int(d), maxWindowPkts)
		s.pullsExpected = max(0, s.pullsExpected-int(d))
	}
	e.schedule(c)
	e.rearm(c)
}

// handleBounced: a switch returned our own (trimmed) DATA header. Resend
// at once only if no more PULLs are expected, if the whole first window
// bounced, or if the network looks asymmetric (paper 3.2.4); otherwise it
// waits in the retransmission queue for a PULL.
func (e *Endpoint) handleBounced(f *Frame, now Time) error {
	h := &f.Header
	e.stats.BouncedIn++
	if h.Type != TypeData {
		return nil // bounced control frames: covered by RTO / pull counter
	}
	key := connKey{remoteIP: binary.BigEndian.Uint32(f.SrcIP[:]), remotePort: h.DstPort, localPort: h.SrcPort, connID: h.ConnID}
	idx, ok := e.table.get(key)
	if !ok || idx < 0 { // none, or in time-wait
		e.stats.UnknownConn++
		return ErrUnknownConn
	}
	c := e.conns[idx]
	s := &c.snd
	if h.Flags&FlagAck != 0 && !c.closed {
		// The ACK this frame carried did not reach the peer: send it again.
		e.queueCtl(c, TypeAck, h.PullCounter, 0, unknownPath, 0)
	}
	if !s.inWindow(h.Seq) {
		return nil
	}
	d := s.desc(h.Seq)
	if d.state != pktInflight {
		return nil
	}
	c.paths.nack(h.PathID)
	if d.first {
		s.firstBounced++
	}
	s.queueRtx(h.Seq)
	if s.pullsExpected <= 0 || (d.first && s.firstBounced >= s.firstSent) || s.asymmetric() {
		s.markUrgent(h.Seq)
		e.stats.BouncedResent++
	}
	e.schedule(c)
	e.rearm(c)
	return nil
}

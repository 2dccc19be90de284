package ndp

import "math/bits"

// Control-frame coalescing (Config.CoalesceControl). A receive batch from
// one sender makes the receiver queue an ACK per packet and, as the pull
// pacer releases them, PULLs: on a link where every frame has a fixed cost
// (AF_XDP copy mode: a descriptor, a copy and a share of a sendto) that is
// two control frames per data packet. While a connection's last ACK or PULL
// frame is still queued, and no other frame of the connection (a NACK) was
// queued after it, later ones merge into it:
//
//   - a PULL updates its pull counter (counters are cumulative, the sender
//     sends as many packets as the counter advanced) and, on an ACK frame,
//     sets FlagPull;
//   - an ACK of a later packet sets a bit of the ACK frame's bitmap
//     (FlagAckMore; Offset bit i acknowledges Seq+1+i), or turns a queued
//     PULL frame into an ACK that carries it.
//
// Nothing waits for a merge: frames only merge while queued for the same
// PollFrame calls, so latency is unchanged and a lost merged frame costs
// what its parts would have (the RTO, the pull counter and stall probes
// recover ACKs and PULLs alike). The sender attributes each acknowledged
// packet to the path it sent it on (its own record), not the frame's.

// mergeCtl merges an ACK or PULL for c into c's queued control frame; false
// if it cannot (the frame left, belongs to a recycled slot, or an ACK falls
// outside its bitmap).
func (e *Endpoint) mergeCtl(c *conn, t PacketType, seq, pull uint32, path uint16) bool {
	f := e.ctl.pending(c.ctlPending - 1)
	if f == nil || f.connID != c.key.connID || f.srcPort != c.key.localPort || f.dstPort != c.key.remotePort || f.dstIP != c.remote.IP {
		c.ctlPending = 0
		return false
	}
	switch {
	case t == TypePull && f.typ == TypePull:
		f.pull = pull
	case t == TypePull && f.typ == TypeAck:
		f.pull = pull
		f.flags |= FlagPull
	case t == TypeAck && f.typ == TypePull:
		f.typ, f.seq, f.pathID, f.udpSrc = TypeAck, seq, path, c.ctlSrc(path)
		f.flags |= FlagPull
	case t == TypeAck && f.typ == TypeAck:
		d := seq - f.seq - 1
		switch {
		case seq == f.seq:
			// a duplicate's re-ACK: already in this frame
		case d < 64:
			f.off |= 1 << d
			f.flags |= FlagAckMore
		default:
			return false
		}
	default:
		return false
	}
	e.stats.ControlMerged++
	return true
}

// handleAck is the sender's handling of an ACK frame: its own packet, the
// packets of its bitmap, and the PULL it carries. The frame's path is the one
// echoed for its own packet (Seq), so that ACK is handled as an unmerged one
// (an RTT sample that can tell copies apart, rtt.go); the bitmap's ACKs keep
// FlagAckMore and carry the path of the sender's own record, which says nothing
// about which copy arrived.
func (e *Endpoint) handleAck(c *conn, h *Header, now Time) {
	head := *h
	head.Flags &^= FlagAckMore
	e.sndAck(c, &head, now)
	if h.Flags&FlagAckMore != 0 {
		more := *h
		for m := h.Offset; m != 0 && !c.closed; m &= m - 1 {
			more.Seq = h.Seq + 1 + uint32(bits.TrailingZeros64(m))
			if c.snd.inWindow(more.Seq) {
				more.PathID = c.snd.desc(more.Seq).path
			}
			e.sndAck(c, &more, now)
		}
	}
	if h.Flags&FlagPull != 0 && !c.closed {
		e.stats.PullsIn++
		e.sndPull(c, h, now)
	}
}

// carryAck sends cf, a queued plain ACK (no bitmap, no PULL), inside a DATA
// frame of the same connection when that connection may send right now
// (pull credit, or push credit and, for a paced connection, allowPush): an
// RPC server's answer then acknowledges the request in its own frame
// instead of a frame of its own ahead of it. It returns 0 when cf must go
// out as it is; pushed as PollFrame reports it (unsolicited data of a paced
// connection).
func (e *Endpoint) carryAck(b []byte, cf *ctlFrame, now Time, allowPush bool) (int, bool) {
	if !e.cfg.CoalesceControl || cf.typ != TypeAck || cf.flags&(FlagAckMore|FlagPull) != 0 || cf.owner == 0 {
		return 0, false
	}
	c := e.conns[cf.owner-1]
	if c == nil || c.gen != cf.ownGen || c.closed || len(b) < HeaderOverhead+1 {
		return 0, false
	}
	pulled := c.snd.canPull()
	if !pulled && !((allowPush || !c.paced) && c.snd.canPush()) {
		return 0, false
	}
	n := e.sendData(c, b, now, pulled, cf)
	if n == 0 {
		return 0, false
	}
	e.rearm(c)
	return n, !pulled && c.paced
}

// carriedAck handles the ACK a DATA frame carries (FlagAck): the peer's
// acknowledgement of our packet h.PullCounter, with the path that packet
// arrived on echoed in h.AckPath, as an ACK frame echoes it. So it is an
// RTT sample that tells copies apart (Karn by path, rtt.go): an RPC whose
// ACKs all ride in the next request or answer (busy polling defers them
// for that) still learns that an RTO fired on a late peer. A peer that
// does not echo (AckPath 0) gets it attributed to the path we sent a
// packet sent once on, and no sample for one sent more than once. It
// reports false if that closed c.
func (e *Endpoint) carriedAck(c *conn, h *Header, now Time) bool {
	e.stats.AcksIn++
	ack := *h
	ack.Type, ack.Flags, ack.Seq, ack.PathID = TypeAck, h.Flags&FlagPriority, h.PullCounter, unknownPath
	if h.AckPath != 0 {
		ack.PathID = uint16(h.AckPath - 1)
	} else if c.snd.inWindow(ack.Seq) {
		if d := c.snd.desc(ack.Seq); d.karn == karnOne {
			ack.PathID = d.path // one copy: it is the one acknowledged
		}
	}
	e.sndAck(c, &ack, now)
	return !c.closed
}

// unknownPath stands for "which copy is acknowledged is not known" in an
// ACK's path field (a carried ACK from a peer that does not echo): it
// credits no path and gives no RTT sample for a packet sent more than once
// (Karn).
const unknownPath = 0xFFFF

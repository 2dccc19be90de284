package ndp

import "math/bits"

// ACK holding (Config.AckHold, with CoalesceControl). A receiver that pulls
// a sender owes it an ACK per DATA packet and, one pull slot later, a PULL.
// Coalescing merges the two only when the pacer releases the PULL before
// the ACK frame has left, which at one pull per connection every N slots
// (N senders) it seldom does: an 8-to-1 incast's client sent an ACK frame
// and a PULL frame for most packets. Holding the ACK instead:
//
//   - an ACK of connection c is not queued but held in c (ackSeq, and a
//     64-bit bitmap of later packets, as a merged ACK frame carries them);
//     later ACKs of c join it;
//   - the next PULL of c (PullReleased) queues the held ACK first, and the
//     PULL merges into it: one ACK frame carrying the PULL;
//   - anything else that must not wait queues it at once: c's pulls are
//     dropped (the sender's LAST: no PULL is coming), a NACK or RESET of c
//     is queued, an ACK falls outside the bitmap, or it was held AckHold
//     (the connection's timer).
//
// An ACK is delayed by at most AckHold, and by at most a pull slot per
// pulled connection while the pacer keeps its schedule; the sender's RTT
// samples include the delay, as they include a delayed TCP ACK's.
//
// The ACK of a one-packet message (its packet carries LAST: no PULL is
// coming) is held the same way for the connection's answer: the next DATA
// frame of c carries it (sendData), as TCP's delayed ACK rides in an RPC's
// response. A request/response exchange then costs one frame each way
// instead of two, and in AF_XDP copy mode one transmit kick instead of two
// on the answering side's critical path. Without an answer within AckHold
// it leaves as an ACK frame (the timer), as a pulled connection's does.

// holdAck holds an ACK of packet seq for c's next PULL (queueCtl decided
// AckHold applies).
func (e *Endpoint) holdAck(c *conn, seq uint32, path uint16) {
	if c.ackHeld {
		d := seq - c.ackSeq - 1
		switch {
		case seq == c.ackSeq:
			e.stats.ControlMerged++
			return
		case d < 64:
			c.ackMore |= 1 << d
			e.stats.ControlMerged++
			return
		}
		e.releaseAck(c)
	}
	c.ackHeld, c.ackSeq, c.ackPath, c.ackMore, c.ackAt = true, seq, path, 0, e.now
	e.rearm(c)
}

// releaseAck queues c's held ACK, if any, as an ACK frame (merged into c's
// queued control frame when that is still possible).
func (e *Endpoint) releaseAck(c *conn) {
	if !c.ackHeld {
		return
	}
	c.ackHeld = false
	e.queueCtlNow(c, TypeAck, c.ackSeq, 0, c.ackPath, 0)
	for m := c.ackMore; m != 0; m &= m - 1 {
		e.queueCtlNow(c, TypeAck, c.ackSeq+1+uint32(bits.TrailingZeros64(m)), 0, c.ackPath, 0)
	}
	e.rearm(c) // its timer no longer waits for the held ACK
}

// ackHoldDeadline is when c's held ACK must leave (0: none held).
func (e *Endpoint) ackHoldDeadline(c *conn) Time {
	if !c.ackHeld {
		return 0
	}
	return c.ackAt + Time(e.cfg.AckHold)
}

// holdsForAnswer reports whether the ACK of c's packet h, which carries
// LAST, stays held for c's answer instead of leaving now: h is the one
// packet whose ACK is held (a one-packet message; a longer one's ACKs leave
// at once, as before) and ends no stream (a FIN's ACK finishes the peer's
// connection, which must not wait for an answer that will not come).
func (e *Endpoint) holdsForAnswer(c *conn, h *Header) bool {
	return c.ackHeld && c.ackSeq == h.Seq && c.ackMore == 0 && h.Flags&FlagFIN == 0 && !c.closed
}

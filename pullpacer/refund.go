package pullpacer

import "github.com/ndpstack/ndpstack/ndp"

// Refund gives back link time that released PULLs did not use. The queue spaces PULLs
// for PullBytes-sized packets; a pulled packet that arrives shorter (the tail of a
// message, a small RPC) leaves the downlink idle for the difference unless the next
// PULL goes that much earlier. bytes is the wire-byte shortfall of pulled packets
// since the last call (ndp.Endpoint.TakePullShortfall). The release clock moves earlier
// by bytes × 8 / (γ × LinkRate), but never so far that more than MaxBurst PULLs leave
// back to back; refunds beyond that are dropped. An empty queue ignores refunds: an
// idle link has nothing to make up.
func (q *PullQueue) Refund(now ndp.Time, bytes int) {
	if bytes <= 0 || q.total == 0 {
		return
	}
	ps := int64(float64(bytes)*8*1e12/q.cfg.capacity() + 0.5)
	// q.next + q.nextPs/1000 is the release time; subtract ps picoseconds.
	total := q.nextPs - ps
	q.next += ndp.Time(total / 1000)
	q.nextPs = total % 1000
	if q.nextPs < 0 {
		q.nextPs += 1000
		q.next--
	}
	if floor := now - ndp.Time(q.burstFloor); q.next < floor {
		q.next, q.nextPs = floor, 0
	}
	q.stats.RefundedBytes += uint64(bytes)
}

// Charge takes link time that arrivals no PULL scheduled used from the pull
// clock. The queue spaces PULLs so that pulled packets fill γ × LinkRate; a
// DATA packet that arrives unpulled (a first-RTT window, an RPC's request or
// response, a retransmission after a timeout) shares the same downlink, and
// without a charge pulled and pushed traffic together exceed γ × LinkRate, so
// the queue before the receiver builds however small γ is (HULL's headroom
// spent on pushes). bytes is the wire bytes of such packets since the last call
// (ndp.Endpoint.TakeUnpulledBytes). The release clock moves later by
// bytes × 8 / (γ × LinkRate), but never past now plus MaxBurst intervals. An
// empty queue ignores charges: the pushed packets found no pulled traffic to
// collide with. So does a queue whose pulls all belong to from, the connection
// whose first-RTT window the pushed packets were (0: not only one
// connection's first window): its pulled packets come from the same sender,
// behind its window, so the two are not on the downlink at once, and a charge
// would only hold the new flow's pulls back until its window had arrived (30
// packets), leaving the link idle for the round trip its first pulled packets
// then take. Other pushes of a connection (an RTO's resends) are charged even
// against its own pulls: at its sender they add to the pulled packets, and the
// sender's backlog lengthens the round trip the RTO is measured against. Call
// it before Add takes the pulls the same packets owe, so the first packets of
// an idle receiver are not charged.
func (q *PullQueue) Charge(now ndp.Time, bytes int, from ndp.Handle) {
	if bytes <= 0 || q.total == 0 || q.drained {
		return
	}
	if from != 0 && q.Pending(from) == q.total {
		return
	}
	q.stats.ChargedBytes += uint64(bytes)
	ceil := now + ndp.Time(int64(q.cfg.MaxBurst)*q.iv.ns)
	if q.next >= ceil {
		return
	}
	total := q.nextPs + int64(float64(bytes)*8*1e12/q.cfg.capacity()+0.5)
	q.next += ndp.Time(total / 1000)
	q.nextPs = total % 1000
	if q.next >= ceil {
		q.next, q.nextPs = ceil, 0
	}
}

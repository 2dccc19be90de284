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

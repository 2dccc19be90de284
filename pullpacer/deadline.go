package pullpacer

import (
	"slices"

	"github.com/ndpstack/ndpstack/ndp"
)

// D3 rate allocation, done by the receiver for its own downlink (PolicyDeadline).
//
// D3 (SIGCOMM'11, sections 4.1-4.3) has every router on the path hand out rates from
// per-request counters, because no router sees all flows at once. The receiver's pull
// queue does see every flow crossing its downlink, so it recomputes the whole
// allocation centrally instead of Snippet 1's online version:
//
//	C  = gamma x LinkRate (the pull budget)
//	r  = remaining bytes x 8 / (deadline - now)  for each deadline flow (Size and
//	     Deadline hinted, class 0, bytes still missing)
//	quench  if now >= deadline or r > C: the flow cannot make it; fail fast.
//	N  = all class-0 flows (deadline and not), D = sum of r
//	D <= C:  deadline flow a = r + (C - D)/N, other flow a = (C - D)/N
//	D >  C:  every flow first keeps a base rate b (BaseRate, at most C/N). Deadline
//	         flows in earliest-deadline order are then satisfied while they fit
//	         (a = r, taking r - b from what is left); a flow that does not fit is
//	         skipped, not given a partial rate, so later smaller ones can still fit.
//	         What is left is split equally among the flows not satisfied (unsatisfied
//	         deadline flows and flows without hints): a = b + left/rest.
//
// Either way the allocations add up to exactly C. Pulls are then served by WFQ in
// proportion to the allocations (wfq.go), which is work-conserving: what an idle or
// sender-limited flow does not use goes to the others in proportion. An unsatisfied
// deadline flow's r grows as time passes until it exceeds C, and then it is quenched,
// which is D3's flow quenching (section 6.1.3) done at the receiver.

// desiredRate updates and returns i's desired rate in bits/s at now.
func (q *PullQueue) desiredRate(i int32, now ndp.Time) float64 {
	c := &q.conns[i]
	remaining := c.flow.Size - c.received
	if remaining <= 0 {
		c.desired = 0
		return 0
	}
	left := c.flow.Deadline - now
	if left <= 0 {
		c.desired = inf
		return inf
	}
	c.desired = float64(remaining) * 8 * 1e9 / float64(left)
	return c.desired
}

const inf = 1e300

// reallocate recomputes every class-0 allocation at now and quenches flows that cannot
// make their deadline.
func (q *PullQueue) reallocate(now ndp.Time) {
	q.dirty = false
	q.reallocAt = now + ndp.Time(q.cfg.Reallocate)
	q.stats.Reallocations++
	capacity := q.cfg.capacity()

	// Quench flows that cannot make it, and add up the demand of the rest. Walk
	// backwards so a removal does not skip an element.
	demand := 0.0
	deadlineFlows := 0
	for k := len(q.dl) - 1; k >= 0; k-- {
		i := q.dl[k]
		r := q.desiredRate(i, now)
		c := &q.conns[i]
		if r > capacity || (c.flow.Deadline <= now && c.flow.Size > c.received) {
			q.quenchFlow(i) // removes q.dl[k]; q.dirty is set again, harmless
			continue
		}
		demand += r
		if r > 0 {
			deadlineFlows++
		}
	}
	q.dirty = false
	n := q.class0
	if n == 0 {
		return
	}
	if deadlineFlows == 0 {
		fair := capacity / float64(n)
		q.setDefault(fair)
		for _, i := range q.dl { // hinted flows that completed their size
			q.setAlloc(i, fair)
		}
		return
	}
	if demand <= capacity {
		fs := (capacity - demand) / float64(n)
		q.setDefault(fs)
		for _, i := range q.dl {
			q.setAlloc(i, q.conns[i].desired+fs)
		}
		return
	}
	// Oversubscribed.
	base := float64(q.cfg.BaseRate)
	if base == 0 {
		base = capacity / 1000
	}
	base = min(base, capacity/float64(n))
	left := capacity - base*float64(n)
	rest := n
	for _, i := range q.dl { // earliest deadline first
		c := &q.conns[i]
		if c.desired > 0 && c.desired-base <= left {
			left -= c.desired - base
			c.alloc = -c.desired // mark satisfied for the second pass
			rest--
		}
	}
	share := base
	if rest > 0 {
		share += left / float64(rest)
	}
	q.setDefault(share)
	for _, i := range q.dl {
		c := &q.conns[i]
		if c.alloc < 0 {
			q.setAlloc(i, -c.alloc)
		} else {
			q.setAlloc(i, share)
		}
	}
}

func (q *PullQueue) setDefault(rate float64) {
	q.defaultAlloc = rate
	q.defaultStep = stepFor(rate)
}

func (q *PullQueue) setAlloc(i int32, rate float64) {
	c := &q.conns[i]
	c.alloc = rate
	c.step = stepFor(rate)
}

// dlInsert adds i to the deadline list in (Deadline, handle) order.
func (q *PullQueue) dlInsert(i int32) {
	c := &q.conns[i]
	k, _ := slices.BinarySearchFunc(q.dl, i, func(a, b int32) int {
		ca, cb := &q.conns[a], &q.conns[b]
		switch {
		case ca.flow.Deadline < cb.flow.Deadline:
			return -1
		case ca.flow.Deadline > cb.flow.Deadline:
			return 1
		case ca.h < cb.h:
			return -1
		case ca.h > cb.h:
			return 1
		}
		return 0
	})
	q.dl = slices.Insert(q.dl, k, i)
	c.hinted = true
}

// dlRemove takes i out of the deadline list; its weight reverts to the default.
func (q *PullQueue) dlRemove(i int32) {
	if k := slices.Index(q.dl, i); k >= 0 {
		q.dl = slices.Delete(q.dl, k, k+1)
	}
	c := &q.conns[i]
	c.hinted = false
	c.step = 0
	c.alloc = 0
}

// Allocation returns h's current D3 allocation and desired rate in bits/s (PolicyDeadline),
// as of the last reallocation. Flows without a deadline report the shared fair rate.
func (q *PullQueue) Allocation(h ndp.Handle) (alloc, desired float64, ok bool) {
	i, found := q.index[h]
	if !found || q.cfg.Policy != PolicyDeadline {
		return 0, 0, false
	}
	c := &q.conns[i]
	if c.quenched {
		return 0, c.desired, true
	}
	if c.step != 0 {
		return c.alloc, c.desired, true
	}
	if c.class != 0 {
		return 0, 0, true
	}
	return q.defaultAlloc, c.desired, true
}

// Reallocate forces the D3 allocation to be recomputed at now (PolicyDeadline); Next
// does it on its own every Reallocate interval and after any change.
func (q *PullQueue) Reallocate(now ndp.Time) {
	if q.cfg.Policy == PolicyDeadline {
		q.reallocate(now)
	}
}

package pullpacer

// Weighted fair queuing for class 0 under PolicyDeadline.
//
// Every active connection carries the virtual finish tag of its next pull; the pull
// with the smallest tag goes first and sets the virtual time. A connection's tag grows
// by its step = stepScale / allocated rate per pull served, so backlogged connections
// receive pulls in proportion to their D3 allocations. A connection that becomes
// active starts at max(its last tag, virtual time): idle time earns no credit.

// stepScale converts an allocation in bits/s into a tag step: 1e15 / rate. A 10 Gb/s
// flow steps 1e5 per pull; the virtual time advances about 1e15 / PullBits per second
// of full load (~1e11/s for 1538-byte pulls), far from int64 overflow, and rebase
// handles the rest.
const stepScale = 1e15

// vtimeRebase is the virtual time beyond which all tags are shifted back to zero.
const vtimeRebase = 1 << 61

func stepFor(rate float64) int64 {
	if rate <= 0 {
		return stepScale // 1 bit/s: effectively never, but finite
	}
	s := int64(stepScale / rate)
	if s < 1 {
		s = 1
	}
	return s
}

func (q *PullQueue) stepOf(c *conn) int64 {
	if c.step != 0 {
		return c.step
	}
	return q.defaultStep
}

func (q *PullQueue) less(a, b int32) bool {
	ca, cb := &q.conns[a], &q.conns[b]
	if ca.finish != cb.finish {
		return ca.finish < cb.finish
	}
	return ca.h < cb.h
}

func (q *PullQueue) heapSwap(x, y int) {
	q.heap[x], q.heap[y] = q.heap[y], q.heap[x]
	q.conns[q.heap[x]].heapIdx = int32(x)
	q.conns[q.heap[y]].heapIdx = int32(y)
}

func (q *PullQueue) heapUp(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !q.less(q.heap[j], q.heap[p]) {
			return
		}
		q.heapSwap(j, p)
		j = p
	}
}

func (q *PullQueue) heapDown(j int) {
	n := len(q.heap)
	for {
		l := 2*j + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.less(q.heap[r], q.heap[l]) {
			m = r
		}
		if !q.less(q.heap[m], q.heap[j]) {
			return
		}
		q.heapSwap(j, m)
		j = m
	}
}

func (q *PullQueue) heapPush(i int32) {
	q.heap = append(q.heap, i)
	j := len(q.heap) - 1
	q.conns[i].heapIdx = int32(j)
	q.heapUp(j)
}

func (q *PullQueue) heapRemove(j32 int32) {
	j := int(j32)
	last := len(q.heap) - 1
	removed := q.heap[j]
	if j != last {
		q.heapSwap(j, last)
	}
	q.heap = q.heap[:last]
	q.conns[removed].heapIdx = noIdx
	if j != last {
		q.heapDown(j)
		q.heapUp(j)
	}
}

// rebase shifts every tag down by the virtual time so tags stay far from overflow.
// Relative order, and so the schedule, is unchanged.
func (q *PullQueue) rebase() {
	v := q.vtime
	for k := range q.conns {
		q.conns[k].finish = max(q.conns[k].finish-v, 0)
	}
	q.vtime = 0
}

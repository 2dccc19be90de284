package pullpacer

import (
	"math/bits"

	"github.com/ndpstack/ndpstack/ndp"
)

// Flow carries a connection's scheduling hints (from ndp.Event: Priority, Size, Deadline).
type Flow struct {
	// Priority is the strict priority class; higher is served first. 0 is normal.
	// Ignored under PolicyFair.
	Priority uint8
	// Size is the total number of bytes the flow will deliver (D3 size hint); 0 = unknown.
	Size int64
	// Deadline is the absolute time, on the caller's clock, by which the last byte must
	// have arrived (D3 deadline hint); 0 = none. Only flows with both Size and Deadline
	// set are deadline flows, and only under PolicyDeadline in class 0.
	Deadline ndp.Time
}

// QueueStats are the pull queue's counters.
type QueueStats struct {
	Added         uint64 // pulls accepted by Add
	Released      uint64 // pulls returned by Next
	Dropped       uint64 // queued pulls discarded by Drop, Remove or a quench
	Rejected      uint64 // calls ignored: handle 0, n <= 0, table full, unknown handle, quenched handle
	Quenched      uint64 // flows quenched (deadline passed or desired rate above capacity)
	LateSlots     uint64 // pull slots lost because Next was called late (after a stall) beyond MaxBurst
	Reallocations uint64 // D3 allocations computed
	RefundedBytes uint64 // wire bytes of link time given back by Refund (pulled packets shorter than PullBytes)
	ChargedBytes  uint64 // wire bytes of link time taken by Charge (DATA that arrived unpulled)
	Conns         int    // connections tracked now
	Pending       int64  // pulls queued now
}

const noIdx = -1

// maxPullsPerAdd bounds one Add so pending counts cannot overflow.
const maxPullsPerAdd = 1 << 31

// conn is one connection's state in the queue. Pulls are counts, not queue entries:
// Add(h, n) adds n to pending, so a connection costs the same whatever its backlog.
type conn struct {
	h        ndp.Handle
	pending  int64
	received int64
	flow     Flow
	class    uint8
	quenched bool
	active   bool // linked into its class's structure (pending > 0)
	hinted   bool // in q.dl (deadline flow)
	prev     int32
	next     int32
	heapGen  uint32 // generation of this connection's live heap entry; survives slot reuse
	finish   int64  // WFQ finish tag of the head pull (active) or of the last served pull
	step     int64  // WFQ tag increment per pull; 0 = q.defaultStep
	alloc    float64
	desired  float64
	released uint64
}

// rrList is an intrusive doubly linked list of conn indices (round robin order).
type rrList struct{ head, tail int32 }

// PullQueue is the receiver's per-interface pull queue: it decides which connection's
// PULL leaves next and when. It is sans-IO and not safe for concurrent use: exactly one
// goroutine (its stack's poll loop, or the simulator) owns it and passes `now` in.
type PullQueue struct {
	cfg        QueueConfig
	iv         spacing
	burstFloor int64 // (MaxBurst-2) x interval: how far behind now the release clock may lag

	conns []conn
	free  []int32
	index map[ndp.Handle]int32

	classes [256]rrList
	active  [4]uint64  // bit c set: class c has queued pulls
	heap    []wfqEntry // class 0 under PolicyDeadline: WFQ min-heap on finish tags
	wfqLive int        // live (non-stale) entries in heap
	vtime   int64      // WFQ virtual time: finish tag of the last pull served

	total   int64    // pulls queued
	next    ndp.Time // earliest release time of the next pull
	nextPs  int64    // picosecond remainder of next
	drained bool     // the queue was empty since the last release

	// PolicyDeadline state (deadline.go).
	dl           []int32 // deadline flows sorted by (Deadline, handle)
	class0       int     // connections in class 0 (not quenched)
	defaultStep  int64
	defaultAlloc float64
	reallocAt    ndp.Time
	dirty        bool

	quench     []ndp.Handle
	quenchHead int

	stats QueueStats
}

// NewPullQueue validates cfg (filling defaults) and returns an empty queue.
func NewPullQueue(cfg QueueConfig) (*PullQueue, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q := &PullQueue{
		cfg:     cfg,
		iv:      cfg.interval(),
		conns:   make([]conn, 0, cfg.ExpectedConns),
		free:    make([]int32, 0, cfg.ExpectedConns),
		index:   make(map[ndp.Handle]int32, cfg.ExpectedConns),
		quench:  make([]ndp.Handle, 0, 16),
		drained: true,
	}
	q.burstFloor = int64(cfg.MaxBurst-2) * q.iv.ns
	for c := range q.classes {
		q.classes[c] = rrList{head: noIdx, tail: noIdx}
	}
	if cfg.Policy == PolicyDeadline {
		q.heap = make([]wfqEntry, 0, cfg.ExpectedConns)
		q.setDefault(cfg.capacity())
	}
	return q, nil
}

// Config returns the queue's configuration with defaults filled in.
func (q *PullQueue) Config() QueueConfig { return q.cfg }

// Stats returns the counters.
func (q *PullQueue) Stats() QueueStats {
	s := q.stats
	s.Conns = len(q.index)
	s.Pending = q.total
	return s
}

// Len returns the number of queued pulls.
func (q *PullQueue) Len() int64 { return q.total }

// Pending returns the number of pulls queued for h.
func (q *PullQueue) Pending(h ndp.Handle) int64 {
	if i, ok := q.index[h]; ok {
		return q.conns[i].pending
	}
	return 0
}

// Add queues n pulls for h: one per data packet or trimmed header that arrived. An
// unknown handle is registered (class 0, no hints). Handle 0, n <= 0 or > 2^31, a quenched
// handle or a full table are rejected and counted.
func (q *PullQueue) Add(h ndp.Handle, n int) {
	if h == 0 || n <= 0 || n > maxPullsPerAdd {
		q.stats.Rejected++
		return
	}
	i, ok := q.lookupOrCreate(h)
	if !ok {
		q.stats.Rejected++
		return
	}
	c := &q.conns[i]
	if c.quenched {
		q.stats.Rejected++
		return
	}
	c.pending += int64(n)
	q.total += int64(n)
	q.stats.Added += uint64(n)
	if !c.active {
		q.activate(i)
	}
}

// SetFlow records h's hints (registering h if unknown). Under PolicyPriority and
// PolicyDeadline the priority moves h to its class. Under PolicyDeadline a flow with
// Size and Deadline becomes a deadline flow; if it already cannot make its deadline it
// is quenched at once (see PollQuenched).
func (q *PullQueue) SetFlow(h ndp.Handle, f Flow, now ndp.Time) {
	if h == 0 {
		q.stats.Rejected++
		return
	}
	i, ok := q.lookupOrCreate(h)
	if !ok {
		q.stats.Rejected++
		return
	}
	c := &q.conns[i]
	if c.quenched {
		q.stats.Rejected++
		return
	}
	newClass := q.classFor(f.Priority)
	if newClass != c.class {
		wasActive := c.active
		if wasActive {
			q.deactivate(i)
		}
		if c.class == 0 {
			q.class0--
		}
		c.class = newClass
		if c.class == 0 {
			q.class0++
		}
		if wasActive {
			q.activate(i)
		}
	}
	if c.hinted {
		q.dlRemove(i)
	}
	c.flow = f
	if q.cfg.Policy == PolicyDeadline {
		if c.class == 0 && f.Size > 0 && f.Deadline > 0 {
			q.dlInsert(i)
			if q.desiredRate(i, now) > q.cfg.capacity() {
				q.quenchFlow(i) // cannot make it even with the whole link: fail fast
			}
		}
		q.dirty = true
	}
}

// Progress records that h has received bytesReceived bytes so far (absolute, not a
// delta; smaller values than already seen are ignored). Deadline flows use it for
// D3's remaining size. Unknown handles are ignored.
func (q *PullQueue) Progress(h ndp.Handle, bytesReceived int64) {
	if i, ok := q.index[h]; ok && bytesReceived > q.conns[i].received {
		q.conns[i].received = bytesReceived
	}
}

// Drop discards h's queued pulls (the receiver saw the sender's LAST packet). h stays
// registered with its hints.
func (q *PullQueue) Drop(h ndp.Handle) {
	i, ok := q.index[h]
	if !ok {
		return
	}
	q.dropPending(i)
}

// Remove forgets h and its queued pulls (connection closed).
func (q *PullQueue) Remove(h ndp.Handle) {
	i, ok := q.index[h]
	if !ok {
		return
	}
	q.dropPending(i)
	c := &q.conns[i]
	if c.hinted {
		q.dlRemove(i)
	}
	if c.class == 0 && !c.quenched {
		q.class0--
	}
	delete(q.index, h)
	*c = conn{heapGen: c.heapGen}
	q.free = append(q.free, i)
	q.dirty = true
}

// Next returns the connection whose PULL is due at now, if any. Call it in a loop until
// it returns false; then NextAt says when to call again. After a stall (Next called
// long after NextAt) at most MaxBurst pulls are released back to back; the other
// missed slots are lost (counted in LateSlots), never bunched up.
func (q *PullQueue) Next(now ndp.Time) (ndp.Handle, bool) {
	if q.total == 0 {
		q.drained = true
		return 0, false
	}
	if q.drained {
		// The queue was empty: an idle link has no slots to make up.
		q.drained = false
		if q.next < now {
			q.next, q.nextPs = now, 0
		}
	}
	if now < q.next {
		return 0, false
	}
	if q.cfg.Policy == PolicyDeadline && (q.dirty || now >= q.reallocAt) {
		q.reallocate(now)
		if q.total == 0 { // everything queued was quenched
			q.drained = true
			return 0, false
		}
	}
	i := q.serve()
	c := &q.conns[i]
	c.released++
	q.total--
	q.stats.Released++

	// Advance the release clock by one interval; if it lags now by more than MaxBurst-1
	// intervals, pull it forward so at most MaxBurst releases happen back to back.
	q.nextPs += q.iv.ps
	q.next += ndp.Time(q.iv.ns + q.nextPs/1000)
	q.nextPs %= 1000
	if floor := now - ndp.Time(q.burstFloor); q.next < floor {
		q.stats.LateSlots += uint64(int64(floor-q.next) / max(q.iv.ns, 1))
		q.next, q.nextPs = floor, 0
	}
	if q.total == 0 {
		q.drained = true
	}
	return c.h, true
}

// NextAt returns the earliest time Next can release a pull, and false when the queue
// is empty. A time in the past means "now".
func (q *PullQueue) NextAt() (ndp.Time, bool) {
	if q.total == 0 {
		return 0, false
	}
	return q.next, true
}

// PollQuenched returns a flow the queue quenched (deadline passed, or the rate it needs
// exceeds the link), one per call. The owner should fail the connection with
// ndp.ErrDeadlineUnmeetable (ndp.Endpoint.Quench) and later Remove it.
func (q *PullQueue) PollQuenched() (ndp.Handle, bool) {
	if q.quenchHead == len(q.quench) {
		if q.quenchHead != 0 {
			q.quench, q.quenchHead = q.quench[:0], 0
		}
		return 0, false
	}
	h := q.quench[q.quenchHead]
	q.quenchHead++
	return h, true
}

// Released returns how many pulls h has been given since it was registered.
func (q *PullQueue) Released(h ndp.Handle) uint64 {
	if i, ok := q.index[h]; ok {
		return q.conns[i].released
	}
	return 0
}

func (q *PullQueue) classFor(prio uint8) uint8 {
	if q.cfg.Policy == PolicyFair {
		return 0
	}
	return prio
}

func (q *PullQueue) lookupOrCreate(h ndp.Handle) (int32, bool) {
	if i, ok := q.index[h]; ok {
		return i, true
	}
	if len(q.index) >= q.cfg.MaxConns {
		return 0, false
	}
	var i int32
	if n := len(q.free); n > 0 {
		i = q.free[n-1]
		q.free = q.free[:n-1]
	} else {
		i = int32(len(q.conns))
		q.conns = append(q.conns, conn{})
	}
	gen := q.conns[i].heapGen + 1 // stale heap entries of a previous owner stay stale
	q.conns[i] = conn{h: h, prev: noIdx, next: noIdx, heapGen: gen, finish: q.vtime}
	q.index[h] = i
	q.class0++
	q.dirty = true
	return i, true
}

func (q *PullQueue) dropPending(i int32) {
	c := &q.conns[i]
	if c.active {
		q.deactivate(i)
	}
	q.total -= c.pending
	q.stats.Dropped += uint64(c.pending)
	c.pending = 0
	if q.total == 0 {
		q.drained = true
	}
}

// quenchFlow drops i's pulls, marks it quenched and reports it via PollQuenched.
func (q *PullQueue) quenchFlow(i int32) {
	q.dropPending(i)
	c := &q.conns[i]
	if c.hinted {
		q.dlRemove(i)
	}
	c.quenched = true
	if c.class == 0 {
		q.class0--
	}
	q.quench = append(q.quench, c.h)
	q.stats.Quenched++
	q.dirty = true
}

// usesWFQ reports whether class c is served by weighted fair queuing (D3 weights).
func (q *PullQueue) usesWFQ(class uint8) bool {
	return class == 0 && q.cfg.Policy == PolicyDeadline
}

// activate links i (pending > 0) into its class's structure, at the back: a connection
// that had nothing queued gets no credit for the time it was idle.
func (q *PullQueue) activate(i int32) {
	c := &q.conns[i]
	c.active = true
	if q.usesWFQ(c.class) {
		c.finish = max(c.finish, q.vtime) + q.stepOf(c)
		q.heapPush(i)
	} else {
		l := &q.classes[c.class]
		c.prev, c.next = l.tail, noIdx
		if l.tail != noIdx {
			q.conns[l.tail].next = i
		} else {
			l.head = i
		}
		l.tail = i
	}
	q.active[c.class>>6] |= 1 << (c.class & 63)
}

// deactivate unlinks i from its class's structure.
func (q *PullQueue) deactivate(i int32) {
	c := &q.conns[i]
	c.active = false
	empty := false
	if q.usesWFQ(c.class) {
		// Lazy deletion: the entry stays in the heap, stale, until it surfaces.
		c.heapGen++
		q.wfqLive--
		if empty = q.wfqLive == 0; empty {
			q.heap = q.heap[:0]
		}
	} else {
		l := &q.classes[c.class]
		if c.prev != noIdx {
			q.conns[c.prev].next = c.next
		} else {
			l.head = c.next
		}
		if c.next != noIdx {
			q.conns[c.next].prev = c.prev
		} else {
			l.tail = c.prev
		}
		c.prev, c.next = noIdx, noIdx
		empty = l.head == noIdx
	}
	if empty {
		q.active[c.class>>6] &^= 1 << (c.class & 63)
	}
}

// topClass returns the highest class with queued pulls; q.total must be > 0.
func (q *PullQueue) topClass() uint8 {
	for w := 3; w >= 0; w-- {
		if x := q.active[w]; x != 0 {
			return uint8(w*64 + 63 - bits.LeadingZeros64(x))
		}
	}
	return 0
}

// serve takes one pull from the highest active class and returns its connection.
func (q *PullQueue) serve() int32 {
	class := q.topClass()
	if q.usesWFQ(class) {
		var i int32
		var c *conn
		for {
			top := q.heap[0]
			i, c = top.idx, &q.conns[top.idx]
			if c.active && top.gen == c.heapGen {
				break
			}
			q.heapPop() // stale: dropped, removed or moved since it was pushed
		}
		q.vtime = c.finish
		c.pending--
		if c.pending == 0 {
			q.heapPop()
			q.deactivate(i)
		} else {
			c.finish += q.stepOf(c)
			q.heap[0].finish = c.finish
			q.heapDown(0)
		}
		if q.vtime > vtimeRebase {
			q.rebase()
		}
		return i
	}
	l := &q.classes[class]
	i := l.head
	c := &q.conns[i]
	c.pending--
	if c.pending == 0 {
		q.deactivate(i)
	} else if l.tail != i {
		// Rotate: head goes to the back of the round.
		l.head = c.next
		q.conns[l.head].prev = noIdx
		c.prev, c.next = l.tail, noIdx
		q.conns[l.tail].next = i
		l.tail = i
	}
	return i
}

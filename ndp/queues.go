package ndp

// Queues owned by the Endpoint. All are single-owner (the goroutine that
// drives the Endpoint); none is shared across goroutines, so none needs
// memory ordering.

// ctlFrame is a pending control frame (ACK, NACK, PULL, RESET, or a
// header-only DATA stall probe), kept as a compact descriptor and
// serialised by PollFrame.
type ctlFrame struct {
	dstMAC  [6]byte
	dstIP   [4]byte
	udpSrc  uint16
	typ     PacketType
	code    ResetCode
	flags   Flags
	prio    uint8
	srcPort uint16 // NDP ports
	dstPort uint16
	connID  uint32
	seq     uint32
	pull    uint32
	pathID  uint16
	owner   int32 // index+1 of the connection that queued it (0: stateless)
	ownGen  uint32
	// header-only DATA probe
	synOff uint16
	plen   uint16
	off    uint64
}

// ctlQueue is a fixed-capacity FIFO of control frames. Push on a full
// queue fails (the caller counts the drop): every control frame is
// recoverable (a lost ACK/NACK is covered by the RTO, a lost PULL by the
// pull counter and the stall probe, a lost RESET by time-wait answering
// again).
type ctlQueue struct {
	buf    []ctlFrame
	head   int
	n      int
	pushed uint64 // frames ever pushed: the id of the next one (ids let a connection find its pending frame)
}

func (q *ctlQueue) push(f *ctlFrame) bool {
	if q.n == len(q.buf) {
		return false
	}
	i := q.head + q.n
	if i >= len(q.buf) {
		i -= len(q.buf)
	}
	q.buf[i] = *f
	q.n++
	q.pushed++
	return true
}

// lastID is the id of the frame pushed last (valid after a successful push).
func (q *ctlQueue) lastID() uint64 { return q.pushed - 1 }

// pending returns the frame with id if it has not been popped yet, else nil.
func (q *ctlQueue) pending(id uint64) *ctlFrame {
	first := q.pushed - uint64(q.n) // id of the frame at head
	if id < first || id >= q.pushed {
		return nil
	}
	i := q.head + int(id-first)
	if i >= len(q.buf) {
		i -= len(q.buf)
	}
	return &q.buf[i]
}

func (q *ctlQueue) pop() (*ctlFrame, bool) {
	if q.n == 0 {
		return nil, false
	}
	f := &q.buf[q.head]
	q.head++
	if q.head == len(q.buf) {
		q.head = 0
	}
	q.n--
	return f, true
}

// connRing is a FIFO of connection slot indices (ready-to-send queues).
// Each connection is in a given ring at most once (tracked by a flag in
// the conn), so capacity MaxConns never overflows.
type connRing struct {
	buf  []int32
	head int
	n    int
}

func newConnRing(capacity int) connRing { return connRing{buf: make([]int32, capacity)} }

func (q *connRing) push(i int32) {
	j := q.head + q.n
	if j >= len(q.buf) {
		j -= len(q.buf)
	}
	q.buf[j] = i
	q.n++
}

func (q *connRing) front() int32 { return q.buf[q.head] }

func (q *connRing) pop() int32 {
	i := q.buf[q.head]
	q.head++
	if q.head == len(q.buf) {
		q.head = 0
	}
	q.n--
	return i
}

// evEntry is a queued event reference; details are read from the
// connection when it is popped, so that per-connection events coalesce
// (at most one pending event of each kind per connection, except stale
// pull events invalidated by an epoch).
type evEntry struct {
	kind  EventKind
	idx   int32
	gen   uint32
	epoch uint32
}

// eventRing is a FIFO that grows by doubling when full. Growth is rare and
// bounded: coalescing keeps at most a handful of entries per connection.
type eventRing struct {
	buf  []evEntry
	head int
	n    int
}

func (q *eventRing) push(e evEntry) {
	if q.n == len(q.buf) {
		nb := make([]evEntry, max(64, 2*len(q.buf)))
		for i := 0; i < q.n; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	j := (q.head + q.n) % len(q.buf)
	q.buf[j] = e
	q.n++
}

func (q *eventRing) pop() (evEntry, bool) {
	if q.n == 0 {
		return evEntry{}, false
	}
	e := q.buf[q.head]
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return e, true
}

// timerHeap is an indexed binary min-heap of connections by timer
// deadline; each connection is in it at most once (conn.heapIdx).
type timerHeap struct {
	idx   []int32
	conns *[]*conn
}

func (h *timerHeap) less(a, b int) bool {
	cs := *h.conns
	return cs[h.idx[a]].timerAt < cs[h.idx[b]].timerAt
}

func (h *timerHeap) swap(a, b int) {
	cs := *h.conns
	h.idx[a], h.idx[b] = h.idx[b], h.idx[a]
	cs[h.idx[a]].heapIdx = int32(a)
	cs[h.idx[b]].heapIdx = int32(b)
}

func (h *timerHeap) up(j int) {
	for j > 0 {
		p := (j - 1) / 2
		if !h.less(j, p) {
			break
		}
		h.swap(j, p)
		j = p
	}
}

func (h *timerHeap) down(j int) {
	n := len(h.idx)
	for {
		l := 2*j + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, j) {
			return
		}
		h.swap(j, m)
		j = m
	}
}

// set (re)schedules c at c.timerAt, or removes it when timerAt == 0.
func (h *timerHeap) set(c *conn) {
	if c.timerAt == 0 {
		if c.heapIdx >= 0 {
			h.remove(int(c.heapIdx))
		}
		return
	}
	if c.heapIdx < 0 {
		c.heapIdx = int32(len(h.idx))
		h.idx = append(h.idx, c.idx)
		h.up(int(c.heapIdx))
		return
	}
	j := int(c.heapIdx)
	h.up(j)
	h.down(int(c.heapIdx))
}

func (h *timerHeap) remove(j int) {
	cs := *h.conns
	last := len(h.idx) - 1
	c := cs[h.idx[j]]
	if j != last {
		h.swap(j, last)
	}
	h.idx = h.idx[:last]
	c.heapIdx = -1
	if j < last {
		h.up(j)
		h.down(j)
	}
}

func (h *timerHeap) min() (*conn, bool) {
	if len(h.idx) == 0 {
		return nil, false
	}
	return (*h.conns)[h.idx[0]], true
}

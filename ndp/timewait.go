package ndp

// timeWaitKind says how a time-wait entry answers late frames.
type timeWaitKind uint8

const (
	// twClosed: the connection closed cleanly. Late DATA is re-ACKed (the
	// peer may have lost our last ACK) but never delivered and never opens
	// a new connection; other frames are ignored.
	twClosed timeWaitKind = iota
	// twAborted: the connection was reset. Late DATA and PULLs get a RESET
	// so a peer that missed the first one learns quickly.
	twAborted
)

// TimeWait remembers finished connections for Config.TimeWait so that a
// replayed or duplicated first-RTT packet cannot open a connection twice
// (at-most-once, paper section 3.2.2). Entries are kept in a FIFO ring in
// expiry order (the duration is constant) and indexed by the Endpoint's
// connection table, where a key maps to either its connection's slot or
// its time-wait ring slot (twVal): one probe per received frame and per
// Dial finds both, and a closing connection's entry turns into its
// time-wait entry in place. Each frame that reaches an entry keeps it for
// another Config.TimeWait (refresh): a peer still retransmitting or
// probing keeps its key. A refreshed entry keeps its slot and is moved to
// the tail when its first expiry comes (expire), so a key takes one slot
// however often it is refreshed. When the ring is full the oldest entry is
// evicted early and counted.
type TimeWait struct {
	ring  []twEntry
	head  int // oldest
	n     int
	index *keyTable // the Endpoint's table: key -> twVal(ring slot)
}

type twEntry struct {
	key   connKey
	extra uint32 // µs the key outlives expires (refresh)
	// expires is when expire looks at the entry: its first expiry, or
	// that of its last move to the tail
	expires Time
	kind    timeWaitKind
	code    ResetCode
}

// until is when e's key is forgotten: its expiry, or later if refreshed.
func (e *twEntry) until() Time { return e.expires + Time(e.extra)*1000 }

func newTimeWait(capacity int, index *keyTable) TimeWait {
	return TimeWait{ring: make([]twEntry, capacity), index: index}
}

// twVal is the table value of time-wait ring slot i: negative, where a
// connection's slot is not.
func twVal(i int) int32 { return ^int32(i) }

// entry returns the time-wait entry of table value v (v < 0).
func (tw *TimeWait) entry(v int32) *twEntry { return &tw.ring[^v] }

// add records k until expires, replacing k's connection in the table if it
// is there; it returns true if an older entry had to be evicted to make
// room.
func (tw *TimeWait) add(k connKey, expires Time, kind timeWaitKind, code ResetCode) (evicted bool) {
	if tw.n == len(tw.ring) {
		tw.popOldest()
		evicted = true
	}
	slot := (tw.head + tw.n) % len(tw.ring)
	tw.ring[slot] = twEntry{key: k, expires: expires, kind: kind, code: code}
	tw.n++
	tw.index.put(k, twVal(slot))
	return evicted
}

// refresh keeps e's key until at least until (rounded up to a µs; never
// shortened). Constant time, no slot.
func (tw *TimeWait) refresh(e *twEntry, until Time) {
	if d := until - e.expires; d > 0 {
		us := min((d+999)/1000, 1<<32-1)
		e.extra = max(e.extra, uint32(us))
	}
}

func (tw *TimeWait) popOldest() {
	// The table maps the key to this slot unless a connection or a later
	// entry of the same key took it over.
	tw.index.delIf(tw.ring[tw.head].key, twVal(tw.head), true)
	tw.head = (tw.head + 1) % len(tw.ring)
	tw.n--
}

// expire drops entries that expired at or before now. A refreshed entry
// due now moves to the tail with its later expiry instead: the ring stays
// in expiry order but for such entries, which may wait behind an entry in
// front of them, for at most one TimeWait longer.
func (tw *TimeWait) expire(now Time) {
	for tw.n > 0 && tw.ring[tw.head].expires <= now {
		e := tw.ring[tw.head]
		until := e.until()
		if until <= now {
			tw.popOldest()
			continue
		}
		tw.head = (tw.head + 1) % len(tw.ring)
		slot := (tw.head + tw.n - 1) % len(tw.ring)
		e.expires, e.extra = until, 0
		tw.ring[slot] = e
		tw.index.put(e.key, twVal(slot))
	}
}

// trim drops up to max of the oldest entries while more than keep remain;
// it returns how many of them had not expired at now (evicted early).
func (tw *TimeWait) trim(now Time, keep, max int) (evicted int) {
	for ; max > 0 && tw.n > keep; max-- {
		if tw.ring[tw.head].until() > now {
			evicted++
		}
		tw.popOldest()
	}
	return evicted
}

// next returns the earliest expiry.
func (tw *TimeWait) next() (Time, bool) {
	if tw.n == 0 {
		return 0, false
	}
	return tw.ring[tw.head].expires, true
}

// Len returns the number of entries.
func (tw *TimeWait) Len() int { return tw.n }

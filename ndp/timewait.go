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
// time-wait entry in place. When the ring is full the oldest entry is
// evicted early and counted.
type TimeWait struct {
	ring  []twEntry
	head  int // oldest
	n     int
	index *keyTable // the Endpoint's table: key -> twVal(ring slot)
}

type twEntry struct {
	key     connKey
	expires Time
	kind    timeWaitKind
	code    ResetCode
}

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

func (tw *TimeWait) popOldest() {
	// The table maps the key to this slot unless a connection or a later
	// entry of the same key took it over.
	tw.index.delIf(tw.ring[tw.head].key, twVal(tw.head), true)
	tw.head = (tw.head + 1) % len(tw.ring)
	tw.n--
}

// expire drops entries that expired at or before now.
func (tw *TimeWait) expire(now Time) {
	for tw.n > 0 && tw.ring[tw.head].expires <= now {
		tw.popOldest()
	}
}

// trim drops up to max of the oldest entries while more than keep remain;
// it returns how many of them had not expired at now (evicted early).
func (tw *TimeWait) trim(now Time, keep, max int) (evicted int) {
	for ; max > 0 && tw.n > keep; max-- {
		if tw.ring[tw.head].expires > now {
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

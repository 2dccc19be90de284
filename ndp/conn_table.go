package ndp

// connKey identifies a connection at one endpoint: the remote IPv4 address
// and NDP port, the local NDP port and the dialer-chosen connection id.
// The connection id tells successive connections on the same ports apart
// (and is what time-wait remembers).
type connKey struct {
	remoteIP   uint32
	remotePort uint16
	localPort  uint16
	connID     uint32
}

func (k connKey) hash() uint64 {
	h := uint64(k.remoteIP)<<32 | uint64(k.remotePort)<<16 | uint64(k.localPort)
	h ^= uint64(k.connID) * 0x9e3779b97f4a7c15
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 29
	return h
}

// keyTable is a fixed-capacity open-addressing hash table (linear probing,
// backward-shift deletion) from connKey to an int32 value. It never
// allocates after construction, unlike a Go map under insert/delete churn.
// Capacity is a power of two at least twice the maximum number of entries,
// so probes stay short and an empty slot always exists.
//
// Each slot has a one-byte tag in a separate array (0: empty, else bits of
// the key's hash), and probes read the tags: a slot's key is read only when
// its tag matches. A new connection's key (a server's first DATA, a Dial's
// uniqueness check) lands on a random slot that no frame touched for
// thousands of connections; its 16-byte slot was a cache miss on every
// probe (0.3 µs of a live RPC's server HandleFrame and as much of the
// client's Dial, perf), where the tag array (16 KB at sockapi's 8,192
// entries) stays in cache and the insert only writes the slot.
type keyTable struct {
	tags  []uint8
	slots []keySlot
	mask  uint64
	n     int
	max   int
}

type keySlot struct {
	key connKey
	val int32
}

// tagOf is the tag of a key with hash h: never 0 (the empty tag).
func tagOf(h uint64) uint8 {
	if t := uint8(h >> 56); t != 0 {
		return t
	}
	return 1
}

func newKeyTable(maxEntries int) keyTable {
	c := 16
	for c < 2*maxEntries {
		c <<= 1
	}
	return keyTable{tags: make([]uint8, c), slots: make([]keySlot, c), mask: uint64(c - 1), max: maxEntries}
}

func (t *keyTable) get(k connKey) (int32, bool) {
	h := k.hash()
	tag := tagOf(h)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		g := t.tags[i]
		if g == 0 {
			return -1, false
		}
		if g == tag && t.slots[i].key == k {
			return t.slots[i].val, true
		}
	}
}

// put inserts or updates k. It returns false when the table is full.
func (t *keyTable) put(k connKey, v int32) bool { return t.insert(k, v, true) }

// add inserts k with value v unless k is present, in one probe sequence
// (get then put probed twice). It returns false when k is present (its
// value unchanged) or the table is full.
func (t *keyTable) add(k connKey, v int32) bool { return t.insert(k, v, false) }

// insert stores k with value v in one probe sequence; a present k gets v
// only with replace (and reports false without it).
func (t *keyTable) insert(k connKey, v int32, replace bool) bool {
	h := k.hash()
	tag := tagOf(h)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		g := t.tags[i]
		if g == 0 {
			if t.n >= t.max {
				return false
			}
			t.slots[i] = keySlot{key: k, val: v}
			t.tags[i] = tag
			t.n++
			return true
		}
		if g == tag && t.slots[i].key == k {
			if replace {
				t.slots[i].val = v
			}
			return replace
		}
	}
}

// del removes k and reports whether it was present.
func (t *keyTable) del(k connKey) bool { return t.delIf(k, -1, false) }

// delIf removes k if it is present and, with match, maps to v; it reports
// whether it removed it. One probe sequence (get then del probed twice).
func (t *keyTable) delIf(k connKey, v int32, match bool) bool {
	h := k.hash()
	tag := tagOf(h)
	i := h & t.mask
	for {
		g := t.tags[i]
		if g == 0 {
			return false
		}
		if g == tag && t.slots[i].key == k {
			if match && t.slots[i].val != v {
				return false
			}
			break
		}
		i = (i + 1) & t.mask
	}
	// backward-shift deletion: move later entries of the cluster into the hole
	j := i
	for {
		j = (j + 1) & t.mask
		if t.tags[j] == 0 {
			break
		}
		home := t.slots[j].key.hash() & t.mask
		// can j's entry move to i? yes if home is not cyclically in (i, j]
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i], t.tags[i] = t.slots[j], t.tags[j]
			i = j
		}
	}
	t.slots[i], t.tags[i] = keySlot{}, 0
	t.n--
	return true
}

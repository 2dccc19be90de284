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
type keyTable struct {
	slots []keySlot
	mask  uint64
	n     int
	max   int
}

type keySlot struct {
	key  connKey
	val  int32
	used bool
}

func newKeyTable(maxEntries int) keyTable {
	c := 16
	for c < 2*maxEntries {
		c <<= 1
	}
	return keyTable{slots: make([]keySlot, c), mask: uint64(c - 1), max: maxEntries}
}

func (t *keyTable) get(k connKey) (int32, bool) {
	for i := k.hash() & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if !s.used {
			return -1, false
		}
		if s.key == k {
			return s.val, true
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
	for i := k.hash() & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if !s.used {
			if t.n >= t.max {
				return false
			}
			*s = keySlot{key: k, val: v, used: true}
			t.n++
			return true
		}
		if s.key == k {
			if replace {
				s.val = v
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
	i := k.hash() & t.mask
	for {
		s := &t.slots[i]
		if !s.used {
			return false
		}
		if s.key == k {
			if match && s.val != v {
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
		s := &t.slots[j]
		if !s.used {
			break
		}
		home := s.key.hash() & t.mask
		// can s move to i? yes if home is not cyclically in (i, j]
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.slots[i] = *s
			i = j
		}
	}
	t.slots[i] = keySlot{}
	t.n--
	return true
}

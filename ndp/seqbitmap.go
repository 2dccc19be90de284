package ndp

import "math/bits"

// seqBitmap is a set of sequence numbers within one window (maxWindowPkts
// consecutive numbers), indexed by seq & seqMask.
type seqBitmap [maxWindowPkts / 64]uint64

func (m *seqBitmap) has(seq uint32) bool {
	i := seq & seqMask
	return m[i/64]&(1<<(i%64)) != 0
}

func (m *seqBitmap) set(seq uint32) {
	i := seq & seqMask
	m[i/64] |= 1 << (i % 64)
}

func (m *seqBitmap) clear(seq uint32) {
	i := seq & seqMask
	m[i/64] &^= 1 << (i % 64)
}

// lowest returns the first member at or after from, in window order (from,
// from+1, ..., from+maxWindowPkts-1).
func (m *seqBitmap) lowest(from uint32) (uint32, bool) {
	start := from & seqMask
	w := start / 64
	below := uint64(1)<<(start%64) - 1 // bits of word w before start
	if x := m[w] &^ below; x != 0 {
		return from + uint32(bits.TrailingZeros64(x)) - start%64, true
	}
	for k := uint32(1); k <= uint32(len(m)); k++ {
		wi := (w + k) % uint32(len(m))
		x := m[wi]
		if k == uint32(len(m)) {
			x &= below // back at word w: only the bits before start are left
		}
		if x != 0 {
			idx := wi*64 + uint32(bits.TrailingZeros64(x))
			return from + (idx-start)&seqMask, true
		}
	}
	return 0, false
}

// clearRange removes the members in [from, from+n) (n <= maxWindowPkts) and
// returns how many there were.
func (m *seqBitmap) clearRange(from, n uint32) int {
	cleared := 0
	for n > 0 {
		i := from & seqMask
		w, b := i/64, i%64
		k := min(64-b, n)
		mask := ^uint64(0) >> (64 - k) << b
		cleared += bits.OnesCount64(m[w] & mask)
		m[w] &^= mask
		from += k
		n -= k
	}
	return cleared
}

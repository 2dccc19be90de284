package ndp

import "testing"

// TestSumBytesLong: sumBytes agrees with a 16-bit reference sum over
// random lengths up to a jumbo frame, of random bytes and of all-0xff
// bytes (every add carries), from every alignment of the slice.
func TestSumBytesLong(t *testing.T) {
	// Both paths of sumBytes: the wide one where the CPU has it (amd64
	// with AVX2), then the add-with-carry chain alone.
	wide := hasAVX2
	defer func() { hasAVX2 = wide }()
	for _, hasAVX2 = range []bool{wide, false} {
		checkSumBytesLong(t)
	}
}

func checkSumBytesLong(t *testing.T) {
	t.Helper()
	ref := func(b []byte) uint16 {
		var s uint64
		for i := 0; i+1 < len(b); i += 2 {
			s += uint64(b[i])<<8 | uint64(b[i+1])
		}
		if len(b)%2 == 1 {
			s += uint64(b[len(b)-1]) << 8
		}
		for s>>16 != 0 {
			s = s>>16 + s&0xffff
		}
		return uint16(s)
	}
	buf := make([]byte, 9008)
	r := rng{s: 5}
	for it := 0; it < 3000; it++ {
		for i := range buf {
			if it%3 == 0 {
				buf[i] = 0xff
			} else {
				buf[i] = byte(r.next())
			}
		}
		off := r.intn(8)
		b := buf[off : off+r.intn(len(buf)-8)]
		acc := uint64(r.next() >> 40) // a running accumulator, as the pseudo-header's
		got, want := fold(sumBytes(acc, b)), ref(b)
		// the reference with acc added
		w := uint64(want) + uint64(fold(acc))
		w = w>>16 + w&0xffff
		if g, w := got, uint16(w); g != w && !(g == 0 && w == 0xffff) && !(g == 0xffff && w == 0) {
			t.Fatalf("wide path %v, len %d off %d: %#x, want %#x", hasAVX2, len(b), off, g, w)
		}
	}
}

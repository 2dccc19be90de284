package sim

// The workloads send a deterministic pseudo-random byte stream per flow, so a receiver
// checks every byte it gets against what was sent without keeping a copy. Byte o of
// flow f is byte o%8 (little-endian) of patternWord(f, o/8).

func mix(x uint64) uint64 {
	x ^= x >> 31
	x *= 0x94D049BB133111EB
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 32
	return x
}

// patternWord is the 8-byte word w of flow's stream.
func patternWord(flow uint64, w int64) uint64 { return mix(flow*0x9E3779B97F4A7C15 ^ uint64(w)) }

// fillPattern writes flow's bytes starting at stream offset off into b.
func fillPattern(b []byte, flow uint64, off int64) {
	for i := 0; i < len(b); {
		o := off + int64(i)
		w := patternWord(flow, o>>3)
		for j := o & 7; j < 8 && i < len(b); j++ {
			b[i] = byte(w >> (8 * j))
			i++
		}
	}
}

// checkPattern reports the index of the first byte of b that differs from flow's bytes
// at off, or -1.
func checkPattern(b []byte, flow uint64, off int64) int {
	for i := 0; i < len(b); {
		o := off + int64(i)
		w := patternWord(flow, o>>3)
		for j := o & 7; j < 8 && i < len(b); j++ {
			if b[i] != byte(w>>(8*j)) {
				return i
			}
			i++
		}
	}
	return -1
}

package sim

import "encoding/binary"

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

// fillPattern writes flow's bytes starting at stream offset off into b: a partial word
// at each end, whole words between.
func fillPattern(b []byte, flow uint64, off int64) {
	i := 0
	for ; i < len(b) && (off+int64(i))&7 != 0; i++ {
		o := off + int64(i)
		b[i] = byte(patternWord(flow, o>>3) >> (8 * (o & 7)))
	}
	w := (off + int64(i)) >> 3
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], patternWord(flow, w))
		w++
	}
	for ; i < len(b); i++ {
		o := off + int64(i)
		b[i] = byte(patternWord(flow, o>>3) >> (8 * (o & 7)))
	}
}

// checkPattern reports the index of the first byte of b that differs from flow's bytes
// at off, or -1. It compares whole words where it can.
func checkPattern(b []byte, flow uint64, off int64) int {
	i := 0
	for ; i < len(b) && (off+int64(i))&7 != 0; i++ {
		o := off + int64(i)
		if b[i] != byte(patternWord(flow, o>>3)>>(8*(o&7))) {
			return i
		}
	}
	w := (off + int64(i)) >> 3
	for ; i+8 <= len(b); i += 8 {
		if x := binary.LittleEndian.Uint64(b[i:]) ^ patternWord(flow, w); x != 0 {
			for j := 0; ; j++ {
				if byte(x>>(8*j)) != 0 {
					return i + j
				}
			}
		}
		w++
	}
	for ; i < len(b); i++ {
		o := off + int64(i)
		if b[i] != byte(patternWord(flow, o>>3)>>(8*(o&7))) {
			return i
		}
	}
	return -1
}

package sim

import (
	"encoding/binary"
	"math/bits"
)

// The workloads send a deterministic pseudo-random byte stream per flow, so a receiver
// checks every byte it gets against what was sent without keeping a copy. Byte o of
// flow f is byte o%8 (little-endian) of patternWord(f, o/8). The words step by a
// constant, so filling and checking cost about as much as copying.

func mix(x uint64) uint64 {
	x ^= x >> 31
	x *= 0x94D049BB133111EB
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 32
	return x
}

// patternStep is the difference between consecutive words of a stream: odd, so the
// words of one stream are distinct for 2^64 words and a byte delivered at the wrong
// offset differs from the expected one.
const patternStep = 0x9E3779B97F4A7C15

// patternBase is word 0 of flow's stream.
func patternBase(flow uint64) uint64 { return mix(flow * 0xBF58476D1CE4E5B9) }

// patternWord is the 8-byte word w of flow's stream: patternBase(flow) + w·patternStep,
// one addition per word when filling or checking in order.
func patternWord(flow uint64, w int64) uint64 { return patternBase(flow) + uint64(w)*patternStep }

// fillPattern writes flow's bytes starting at stream offset off into b: a partial word
// at each end, whole words between.
func fillPattern(b []byte, flow uint64, off int64) {
	i := 0
	for ; i < len(b) && (off+int64(i))&7 != 0; i++ {
		o := off + int64(i)
		b[i] = byte(patternWord(flow, o>>3) >> (8 * (o & 7)))
	}
	w := patternWord(flow, (off+int64(i))>>3)
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], w)
		w += patternStep
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
	w := patternWord(flow, (off+int64(i))>>3)
	for ; i+8 <= len(b); i += 8 {
		if x := binary.LittleEndian.Uint64(b[i:]) ^ w; x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
		w += patternStep
	}
	for ; i < len(b); i++ {
		o := off + int64(i)
		if b[i] != byte(patternWord(flow, o>>3)>>(8*(o&7))) {
			return i
		}
	}
	return -1
}

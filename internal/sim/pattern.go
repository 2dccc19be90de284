package sim

// The workloads send a deterministic pseudo-random byte stream per flow, so a receiver
// checks every byte it gets against what was sent without keeping a copy.

func mix(x uint64) uint64 {
	x ^= x >> 31
	x *= 0x94D049BB133111EB
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 32
	return x
}

// fillPattern writes flow's bytes starting at stream offset off into b.
func fillPattern(b []byte, flow uint64, off int64) {
	for i := range b {
		o := off + int64(i)
		b[i] = byte(mix(flow*0x9E3779B97F4A7C15^uint64(o>>3)) >> (8 * (o & 7)))
	}
}

// checkPattern reports the index of the first byte of b that differs from flow's bytes
// at off, or -1.
func checkPattern(b []byte, flow uint64, off int64) int {
	for i := range b {
		o := off + int64(i)
		if b[i] != byte(mix(flow*0x9E3779B97F4A7C15^uint64(o>>3))>>(8*(o&7))) {
			return i
		}
	}
	return -1
}

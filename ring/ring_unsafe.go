package ring

import "unsafe"

// word64 returns a pointer to the 8-byte word at b[off:], for use with
// sync/atomic. The caller guarantees off+8 <= len(b); the word must be
// 8-byte aligned (ring blocks are 128-byte aligned in a page-aligned mapping),
// which is checked because a misaligned atomic faults on some architectures.
func word64(b []byte, off uint64) (*uint64, bool) {
	p := unsafe.Pointer(&b[off : off+8][0])
	return (*uint64)(p), uintptr(p)%8 == 0
}

// word32 is word64 for a 4-byte word.
func word32(b []byte, off uint64) (*uint32, bool) {
	p := unsafe.Pointer(&b[off : off+4][0])
	return (*uint32)(p), uintptr(p)%4 == 0
}

// atomicStore stores v into the word at b[off:]; tests use it to play a
// hostile peer writing raw index words.
func atomicStore(b []byte, off uint64, v uint64) {
	p, _ := word64(b, off)
	*(*uint64)(unsafe.Pointer(p)) = v
}

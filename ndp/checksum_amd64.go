//go:build amd64 && !purego

package ndp

// sum32AVX2 returns the sum of b's little-endian 32-bit words, as a 64-bit
// integer (no carry is lost: 2^32 words before it could overflow). len(b)
// must be a multiple of 32. It uses AVX2: call it only when hasAVX2.
//
//go:noescape
func sum32AVX2(b []byte) uint64

// cpuid and xgetbv are the instructions (checksum_amd64.s), as
// golang.org/x/sys/cpu uses them; ndp imports nothing outside the
// standard library.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax, edx uint32)

// hasAVX2: the CPU has AVX2 and the OS saves the YMM registers.
var hasAVX2 = detectAVX2()

func detectAVX2() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave, avx = 1 << 27, 1 << 28
	if ecx1&osxsave == 0 || ecx1&avx == 0 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 { // XMM and YMM state enabled
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0
}

// sumWords32 sums the longest prefix of b that is a multiple of 32 bytes
// as little-endian 32-bit words, when the CPU can do it 32 bytes an
// instruction pair (AVX2); it returns the sum and the prefix's length (0
// when it did nothing: short b, or no AVX2).
func sumWords32(b []byte) (uint64, int) {
	if !hasAVX2 || len(b) < sumWideMin {
		return 0, 0
	}
	n := len(b) &^ 31
	return sum32AVX2(b[:n]), n
}

//go:build amd64 && !purego

#include "textflag.h"

// func sum32AVX2(b []byte) uint64
// Zero-extends each 16 bytes' four little-endian 32-bit words to 64-bit
// lanes (VPMOVZXDQ) and adds them into four 4-lane accumulators (64 bytes
// an iteration, then 32 bytes at a time); the lanes are added at the end.
TEXT ·sum32AVX2(SB), NOSPLIT, $0-32
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	CMPQ CX, $64
	JB   tail32
loop64:
	VPMOVZXDQ 0(SI), Y4
	VPMOVZXDQ 16(SI), Y5
	VPMOVZXDQ 32(SI), Y6
	VPMOVZXDQ 48(SI), Y7
	VPADDQ Y4, Y0, Y0
	VPADDQ Y5, Y1, Y1
	VPADDQ Y6, Y2, Y2
	VPADDQ Y7, Y3, Y3
	ADDQ $64, SI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE  loop64
tail32:
	CMPQ CX, $32
	JB   done
	VPMOVZXDQ 0(SI), Y4
	VPMOVZXDQ 16(SI), Y5
	VPADDQ Y4, Y0, Y0
	VPADDQ Y5, Y1, Y1
done:
	VPADDQ Y1, Y0, Y0
	VPADDQ Y3, Y2, Y2
	VPADDQ Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDQ X1, X0, X0
	VMOVQ X0, AX
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

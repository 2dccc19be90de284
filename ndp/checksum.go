package ndp

import (
	"encoding/binary"
	"math/bits"
)

// Internet checksum (RFC 1071) helpers. sum64 accumulates big-endian
// 64-bit words with end-around carry; folding the result to 16 bits gives
// the same one's-complement sum as adding 16-bit words (RFC 1071 §2(B):
// the sum is independent of word size as long as carries wrap around).

// sumBytes adds b to the running one's-complement accumulator acc.
// b is treated as if it started at an even offset of the checksummed data.
func sumBytes(acc uint64, b []byte) uint64 {
	var c uint64
	for len(b) >= 32 {
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[0:8]), c)
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[8:16]), c)
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[16:24]), c)
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[24:32]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.BigEndian.Uint64(b[0:8]), c)
		b = b[8:]
	}
	acc, c = bits.Add64(acc, c, 0)
	if c != 0 {
		acc++ // cannot overflow again: acc was at most 2^64-1 and wrapped to 0
	}
	// tail: up to 7 bytes, as 16-bit words, last odd byte padded with zero
	var t uint64
	for len(b) >= 2 {
		t += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		t += uint64(b[0]) << 8
	}
	acc, c = bits.Add64(acc, t, 0)
	acc += c
	return acc
}

// fold reduces the accumulator to a 16-bit one's-complement sum.
func fold(acc uint64) uint16 {
	acc = (acc >> 32) + (acc & 0xffffffff)
	acc = (acc >> 32) + (acc & 0xffffffff)
	acc = (acc >> 16) + (acc & 0xffff)
	acc = (acc >> 16) + (acc & 0xffff)
	acc = (acc >> 16) + (acc & 0xffff)
	return uint16(acc)
}

// ipv4HeaderChecksum returns the checksum field value for the 20-byte IPv4
// header h (whose checksum field must be zero, or it is ignored by being
// subtracted: callers zero it first).
func ipv4HeaderChecksum(h []byte) uint16 {
	return ^fold(sumBytes(0, h[:20]))
}

// udpChecksum computes the UDP checksum over the IPv4 pseudo-header and the
// UDP header+payload udp (whose checksum field must be zero). A computed
// value of 0 is sent as 0xffff (RFC 768).
func udpChecksum(src, dst []byte, udp []byte) uint16 {
	acc := uint64(binary.BigEndian.Uint32(src)) + uint64(binary.BigEndian.Uint32(dst)) +
		uint64(17) + uint64(len(udp))
	cs := ^fold(sumBytes(acc, udp))
	if cs == 0 {
		cs = 0xffff
	}
	return cs
}

// udpChecksumValid verifies a received UDP datagram (checksum field included).
func udpChecksumValid(src, dst []byte, udp []byte) bool {
	acc := uint64(binary.BigEndian.Uint32(src)) + uint64(binary.BigEndian.Uint32(dst)) +
		uint64(17) + uint64(len(udp))
	return fold(sumBytes(acc, udp)) == 0xffff
}

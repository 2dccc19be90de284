package ndp

import (
	"encoding/binary"
	"math/bits"
)

// Internet checksum (RFC 1071) helpers. The running accumulator holds a
// sum of big-endian 16-bit words with carries kept in the upper bits;
// folding it gives the 16-bit one's-complement sum (RFC 1071 §2(B): the
// sum is independent of word size as long as carries wrap around).

// sumBytes adds b to the running one's-complement accumulator acc.
// b is treated as if it started at an even offset of the checksummed data.
//
// On amd64 with AVX2, a b of sumWideMin bytes or more is summed 32 bytes
// at a time as little-endian 32-bit words zero-extended into 64-bit lanes
// (sumWords32, checksum_amd64.s: 1 KB in about a quarter of the time of
// the chain below). Otherwise the bulk of b is summed as little-endian
// 64-bit words in one add-with-carry chain (bits.Add64: ADC on amd64, 8
// bytes an add, the carry wrapped around at the end), 64 bytes an
// iteration. The rest, either way, as 32-bit words into a 64-bit
// accumulator that cannot overflow. The sum is folded to 16 bits and
// byte-swapped to big-endian order (RFC 1071 §2(B): the one's-complement
// sum of byte-swapped words is the byte-swapped sum). Four independent
// accumulators of 32-bit words in Go took 1.4x as long as the chain
// (BenchmarkChecksum1424, alternating runs: 192 against 139 ns).
func sumBytes(acc uint64, b []byte) uint64 {
	s, wide := sumWords32(b)
	b = b[wide:]
	if wide == 0 {
		var c uint64
		for len(b) >= 64 {
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:8]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:16]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[16:24]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[24:32]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[32:40]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[40:48]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[48:56]), c)
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[56:64]), c)
			b = b[64:]
		}
		for len(b) >= 8 {
			s, c = bits.Add64(s, binary.LittleEndian.Uint64(b), c)
			b = b[8:]
		}
		s, c = bits.Add64(s, 0, c)
		s += c // cannot carry again: s is 0 when the add above carried
		s = s>>32 + s&0xffffffff
	}
	for len(b) >= 4 {
		s += uint64(binary.LittleEndian.Uint32(b))
		b = b[4:]
	}
	t := uint64(bits.ReverseBytes16(fold(s)))
	// tail: up to 3 bytes, as big-endian 16-bit words, last odd byte padded with zero
	for len(b) >= 2 {
		t += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		t += uint64(b[0]) << 8
	}
	var c uint64
	acc, c = bits.Add64(acc, t, 0)
	return acc + c
}

// sumWideMin is the shortest b sumBytes hands to sumWords32: below it the
// call costs more than it saves (headers, control frames).
const sumWideMin = 128

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
	return udpChecksumPrefix(src, dst, udp, len(udp))
}

// udpChecksumPrefix is udpChecksum of a datagram of udpLen bytes whose bytes
// past the prefix are all zero (Config.ZeroPayload): zero words add nothing
// to the sum, so only the prefix is read.
func udpChecksumPrefix(src, dst []byte, prefix []byte, udpLen int) uint16 {
	acc := uint64(binary.BigEndian.Uint32(src)) + uint64(binary.BigEndian.Uint32(dst)) +
		uint64(17) + uint64(udpLen)
	cs := ^fold(sumBytes(acc, prefix))
	if cs == 0 {
		cs = 0xffff
	}
	return cs
}

// udpChecksumValid verifies a received UDP datagram (checksum field included).
func udpChecksumValid(src, dst []byte, udp []byte) bool {
	return udpChecksumValidPrefix(src, dst, udp, len(udp))
}

// udpChecksumValidPrefix is udpChecksumValid for a datagram of udpLen bytes
// whose bytes past the prefix are taken to be zero (Config.ZeroPayload).
func udpChecksumValidPrefix(src, dst []byte, prefix []byte, udpLen int) bool {
	acc := uint64(binary.BigEndian.Uint32(src)) + uint64(binary.BigEndian.Uint32(dst)) +
		uint64(17) + uint64(udpLen)
	return fold(sumBytes(acc, prefix)) == 0xffff
}

// SetIPv4Word writes v at byte offset off (even, inside the 20-byte header)
// of the IPv4 header ip and fixes the header checksum incrementally
// (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')). Switches rewriting TTL, DSCP
// or ECN use it.
func SetIPv4Word(ip []byte, off int, v uint16) {
	old := binary.BigEndian.Uint16(ip[off:])
	binary.BigEndian.PutUint16(ip[off:], v)
	s := uint32(^binary.BigEndian.Uint16(ip[10:])) + uint32(^old) + uint32(v)
	s = (s & 0xffff) + (s >> 16)
	s = (s & 0xffff) + (s >> 16)
	binary.BigEndian.PutUint16(ip[10:], ^uint16(s))
}

package testbed

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
)

func TestUDPFrameChecksums(t *testing.T) {
	f := UDPFrame{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("10.1.0.1"), DstIP: netip.MustParseAddr("10.1.0.2"),
		SrcPort: 1234, DstPort: 5678,
	}
	for _, size := range []int{0, 1, 2, 17, 1000, 1458} {
		buf := make([]byte, 1514)
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		n := f.Build(buf, payload)
		if n != UDPHeaderLen+size {
			t.Fatalf("len %d", n)
		}
		if !VerifyUDPFrame(buf[:n]) {
			t.Fatalf("size %d: checksums do not verify", size)
		}
		SwapUDP(buf[:n])
		if !VerifyUDPFrame(buf[:n]) {
			t.Fatalf("size %d: swap broke checksums", size)
		}
		buf[n-1] ^= 0xff
		if size > 0 && VerifyUDPFrame(buf[:n]) {
			t.Fatalf("size %d: corrupted frame verifies", size)
		}
	}
}

// Known-answer test: the example header from RFC 1071 style computations
// (IPv4 header from Wikipedia's "IPv4 header checksum" article).
func TestChecksumKnownAnswer(t *testing.T) {
	hdr := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := Checksum(hdr, 0); got != 0xb861 {
		t.Fatalf("checksum %#x, want 0xb861", got)
	}
}

// checksum16 is the Internet checksum summed one big-endian 16-bit word at
// a time, as RFC 1071 writes it: what Checksum must equal.
func checksum16(b []byte, initial uint32) uint16 {
	sum := uint64(initial)
	for len(b) >= 2 {
		sum += uint64(b[0])<<8 | uint64(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint64(b[0]) << 8
	}
	return ^fold16(sum)
}

func FuzzChecksum(f *testing.F) {
	f.Add([]byte{}, uint32(0))
	f.Add([]byte{0xff}, uint32(0xffffffff))
	f.Add(bytes.Repeat([]byte{0xff}, 1067), uint32(0x1234))
	f.Fuzz(func(t *testing.T, b []byte, initial uint32) {
		if got, want := Checksum(b, initial), checksum16(b, initial); got != want {
			t.Fatalf("Checksum(%d bytes, %#x) = %#x, want %#x", len(b), initial, got, want)
		}
	})
}

func FuzzVerifyUDPFrame(f *testing.F) {
	u := UDPFrame{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6),
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), SrcPort: 1, DstPort: 2}
	buf := make([]byte, 100)
	f.Add(buf[:u.Build(buf, []byte("seed"))])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		ok := VerifyUDPFrame(frame)
		if SwapUDP(frame) && ok && !VerifyUDPFrame(frame) {
			t.Fatal("swap broke a valid frame")
		}
	})
}

// BenchmarkChecksum1KiB: a 1 KiB request's UDP header and payload, as the
// raw AF_XDP floor checksums it (Checksum), and summed a 16-bit word at a
// time (word16).
func BenchmarkChecksum1KiB(b *testing.B) {
	buf := bytes.Repeat([]byte{0xa5, 0x3c, 0x01}, 1032/3)
	b.Run("Checksum", func(b *testing.B) {
		for range b.N {
			Checksum(buf, 0x1234)
		}
	})
	b.Run("word16", func(b *testing.B) {
		for range b.N {
			checksum16(buf, 0x1234)
		}
	})
}

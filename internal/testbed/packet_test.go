package testbed

import (
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

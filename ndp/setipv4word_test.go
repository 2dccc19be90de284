package ndp

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// SetIPv4Word's incremental update gives the checksum a full recompute
// gives, for every word a switch rewrites and many values.
func TestSetIPv4WordMatchesRecompute(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 20000; i++ {
		ip := make([]byte, 20)
		for j := range ip {
			ip[j] = byte(r.Uint32())
		}
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[10:], 0)
		binary.BigEndian.PutUint16(ip[10:], ipv4HeaderChecksum(ip))
		off := []int{0, 8, 2, 6}[i%4]
		SetIPv4Word(ip, off, uint16(r.Uint32()))
		got := binary.BigEndian.Uint16(ip[10:])
		binary.BigEndian.PutUint16(ip[10:], 0)
		if want := ipv4HeaderChecksum(ip); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("case %d: offset %d: incremental checksum %#04x, recomputed %#04x", i, off, got, want)
		}
	}
}

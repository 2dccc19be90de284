package daemon

import (
	"encoding/hex"
	"net/netip"
	"testing"
)

// The IPv4 (addresses only) cases of Microsoft's RSS hash verification
// suite, with its key.
func TestToeplitzVerificationSuite(t *testing.T) {
	key, _ := hex.DecodeString("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")
	r := &RSS{Key: key}
	for _, tc := range []struct {
		src, dst string
		want     uint32
	}{
		{"66.9.149.187", "161.142.100.80", 0x323e8fc2},
		{"199.92.111.2", "65.69.140.83", 0xd718262a},
		{"24.19.198.95", "12.22.207.184", 0xd2d0a5de},
		{"38.27.205.30", "209.142.163.6", 0x82989176},
		{"153.39.163.191", "202.188.127.2", 0x5d1809c5},
	} {
		if got := r.Hash(netip.MustParseAddr(tc.src), netip.MustParseAddr(tc.dst)); got != tc.want {
			t.Errorf("%s -> %s: %#x, want %#x", tc.src, tc.dst, got, tc.want)
		}
	}
}

func TestRSSIndex(t *testing.T) {
	key, _ := hex.DecodeString("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")
	peer, local := netip.MustParseAddr("66.9.149.187"), netip.MustParseAddr("161.142.100.80")
	// 0x323e8fc2 % 4 = 2: indirection entry 2.
	r := &RSS{Key: key, Indir: []uint32{0, 1, 5, 3}, Served: []int{3, 5}}
	if i, ok := r.Index(peer, local); !ok || i != 1 {
		t.Fatalf("Index: %d %v, want 1 (NIC queue 5)", i, ok)
	}
	r.Served = []int{0, 1}
	if _, ok := r.Index(peer, local); ok {
		t.Fatal("a hash to an unserved queue placed")
	}
	if _, ok := (&RSS{}).Index(peer, local); ok {
		t.Fatal("an empty RSS placed")
	}
}

package afxdp

import (
	"testing"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// TestHotPathNoAllocs checks Alloc, Transmit (with its sendto), Receive and
// Release allocate nothing per batch.
func TestHotPathNoAllocs(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	cfg := Config{UDPPort: testPort, NumFrames: 512, RingSize: 64}
	cfg.Interface = v.A.Name
	pa := openIn(t, pair.A, cfg)
	cfg.Interface = v.B.Name
	pb := openIn(t, pair.B, cfg)
	f := frameTo(v, testPort)
	ua, qa := pa.UMEM(), pa.Queues()[0]
	ub, qb := pb.UMEM(), pb.Queues()[0]
	tx := make([]Desc, 8)
	rx := make([]Desc, 8)
	payload := make([]byte, 32)
	allocs := testing.AllocsPerRun(200, func() {
		n := ua.Alloc(tx)
		for i := range tx[:n] {
			tx[i].Len = uint32(f.Build(ua.Buffer(tx[i]), payload))
		}
		qa.Transmit(tx[:n])
		k := qb.Receive(rx)
		ub.Release(rx[:k])
	})
	if allocs != 0 {
		t.Fatalf("hot path allocates %v times per batch", allocs)
	}
}

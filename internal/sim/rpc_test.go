package sim

import (
	"testing"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// 1 KB RPCs on new connections over a 10 Gb/s, 1 µs star: each takes one
// round trip (request and response each fit the first-RTT window), so the
// latency is the base RTT plus serialization, identical every time.
func TestRPCOneRoundTrip(t *testing.T) {
	cfg := RPCConfig{Star: StarConfig{LinkRate: 10e9, LinkDelay: 1000, Endpoint: ndp.Config{IW: 30}, Fabric: fabric.Config{DataQueue: 8}, Seed: 1}, Size: 1024, N: 200}
	r, err := RunRPC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Latencies) != 200 {
		t.Fatalf("%d latencies", len(r.Latencies))
	}
	// Lower bound: request and response each cross two links (4 x 1 µs) and
	// are serialized twice (host link and switch port).
	for i, l := range r.Latencies {
		if l < 4000 || l > 20000 {
			t.Fatalf("rpc %d: latency %d ns outside one round trip [4, 20] µs", i, l)
		}
	}
	t.Logf("first %v last %v", r.Latencies[0], r.Latencies[199])
}

package sim

import (
	"math"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// Pulling at γ < 1 delivers γ of the link's payload rate, and no γ leaves a standing
// queue: the first RTT's pushed packets are charged to the pull clock
// (pullpacer.PullQueue.Charge), so the pulled packets behind them make room.
func TestHULLRunTracksGamma(t *testing.T) {
	p1, err := hullRun(2, 1.0, 1_000_000, 2e6)
	if err != nil {
		t.Fatal(err)
	}
	p9, err := hullRun(2, 0.9, 1_000_000, 2e6)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("γ=1: %+v", p1)
	t.Logf("γ=0.9: %+v", p9)
	want := 0.9 * 1000 * float64(ndp.MaxPayload(1500)) / float64(1500+14+EthernetOverhead)
	if math.Abs(p9.ThroughputMb-want) > 0.02*want || p9.ThroughputMb >= p1.ThroughputMb {
		t.Fatalf("γ=0.9 throughput %.1f Mb/s, want about %.1f and below γ=1's %.1f", p9.ThroughputMb, want, p1.ThroughputMb)
	}
	// One 1500-byte frame at 1 Gb/s is 12 µs: less than one on average.
	if p1.AvgQueueUs > 6 || p9.AvgQueueUs > 6 {
		t.Fatalf("queueing %.2f µs at γ=1, %.2f µs at γ=0.9: a standing queue", p1.AvgQueueUs, p9.AvgQueueUs)
	}
}

// Receiver-driven D3 meets more deadlines than fair pulls once the burst is large.
func TestD3BeatsFairPulls(t *testing.T) {
	fair, err := d3Burst(30, 30e6, false, 5)
	if err != nil {
		t.Fatal(err)
	}
	d3, err := d3Burst(30, 30e6, true, 5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fair %+v, d3 %+v", fair, d3)
	if d3.MetPct <= fair.MetPct || d3.QuenchedPct == 0 || fair.QuenchedPct != 0 {
		t.Fatalf("fair %+v, d3 %+v", fair, d3)
	}
}

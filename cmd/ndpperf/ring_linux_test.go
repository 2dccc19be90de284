package main

import "testing"

// TestRingSmoke runs `ndpperf ring` briefly: every phase finishes and the
// eventfd ping-pong reports round trips on one CPU and across two. It
// measures nothing.
func TestRingSmoke(t *testing.T) {
	var out ringResult
	runJSON(t, &out, "ring", "--n", "20000", "--uds-n", "2000", "--samples", "200", "--gap", "1us", "--json")
	if out.RingMsgsPerS <= 0 || out.UDSMsgsPerS <= 0 || out.RingWakeP50ns <= 0 {
		t.Fatalf("ring phases: %+v", out)
	}
	if out.PingPongSameCPUP50ns <= 0 || out.PingPongSameCPUP99ns < out.PingPongSameCPUP50ns ||
		out.PingPongCrossCPUP50ns <= 0 || out.PingPongCrossCPUP99ns < out.PingPongCrossCPUP50ns {
		t.Fatalf("ping-pong round trips: same CPU %d/%d ns, across %d/%d ns",
			out.PingPongSameCPUP50ns, out.PingPongSameCPUP99ns, out.PingPongCrossCPUP50ns, out.PingPongCrossCPUP99ns)
	}
}

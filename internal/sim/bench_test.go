package sim

import (
	"testing"
	"time"
)

// BenchmarkPermutation runs the k = 4 FatTree permutation (16 hosts, 2 MB flows,
// sender-chosen paths) per iteration, lengths only and with every byte carried and
// checked, and reports events per second of the whole run (setup included).
func BenchmarkPermutation(b *testing.B) {
	for _, bytes := range []bool{false, true} {
		name := "lengths"
		if bytes {
			name = "bytes"
		}
		b.Run(name, func(b *testing.B) {
			cfg := PermutationConfig{Clos: fatTree(4, ECMPPath), Size: 2_000_000}
			cfg.Clos.Params.CheckBytes = bytes
			var events uint64
			start := time.Now()
			for b.Loop() {
				r, err := RunPermutation(cfg)
				if err != nil {
					b.Fatal(err)
				}
				events += r.Events
			}
			b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
		})
	}
}

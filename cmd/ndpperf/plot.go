package main

import (
	"fmt"
	"os"

	"github.com/ndpstack/ndpstack/internal/chart"
)

// plotLatency draws the round-trip CDF of every transport in res to file.
func plotLatency(file, title string, res []latencyResult) error {
	sets := make([]chart.Samples, 0, len(res))
	for _, r := range res {
		sets = append(sets, chart.Samples{Name: r.Transport, Values: r.samplesUs})
	}
	if err := chart.CDF(file, title, "round trip (µs)", sets); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	fmt.Fprintf(os.Stderr, "ndpperf: latency CDF written to %s\n", file)
	return nil
}

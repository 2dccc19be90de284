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

// plotIncast draws every measured round's completion time per transport to
// file, with the run's optimum (the bytes at the pull rate plus a round trip)
// as a reference line when it has one.
func plotIncast(file string, out incastOutput) error {
	var series []chart.Series
	rounds := 0
	for _, r := range out.Results {
		x := make([]float64, len(r.roundsMs))
		for i := range x {
			x[i] = float64(i + 1)
		}
		series = append(series, chart.Series{Name: r.Transport, X: x, Y: r.roundsMs})
		rounds = max(rounds, len(x))
	}
	if out.OptimalMs > 0 && rounds > 0 {
		series = append(series, chart.Series{Name: "optimum", X: []float64{1, float64(rounds)}, Y: []float64{out.OptimalMs, out.OptimalMs}})
	}
	title := "ndpperf incast: completion per round"
	if len(out.Results) > 0 {
		r := out.Results[0]
		title = fmt.Sprintf("ndpperf incast: %d servers × %d bytes, completion per round", r.Servers, r.Size)
	}
	if err := chart.Lines(file, title, "round", "completion (ms)", series); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	fmt.Fprintf(os.Stderr, "ndpperf: incast rounds written to %s\n", file)
	return nil
}

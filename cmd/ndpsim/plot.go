package main

import (
	"fmt"
	"os"

	"github.com/ndpstack/ndpstack/internal/chart"
	"github.com/ndpstack/ndpstack/internal/sim"
)

// plotPermutation draws every flow's goodput over the measurement window,
// slowest first (the paper's Figure 14), with the most payload a link can
// carry as a reference line.
func plotPermutation(file string, r sim.PermutationResult) error {
	n := len(r.FlowGbps)
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i + 1)
	}
	series := []chart.Series{{Name: "NDP flows", X: x, Y: r.FlowGbps}}
	if n > 0 {
		series = append(series, chart.Series{Name: "most payload a link carries",
			X: []float64{1, float64(n)}, Y: []float64{r.MaxGoodputGbps, r.MaxGoodputGbps}})
	}
	title := fmt.Sprintf("ndpsim permutation: %s, %d hosts, %d bytes per flow", r.Topology, r.Hosts, r.SizeBytes)
	if err := chart.Lines(file, title, "flow (slowest first)", "goodput (Gb/s)", series); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	fmt.Fprintf(os.Stderr, "ndpsim: per-flow goodput written to %s\n", file)
	return nil
}

// plotIncast draws every flow's completion time, first done first, with the
// theoretical optimum of the last one (paper Figure 4 reports the last).
func plotIncast(file string, r sim.Result) error {
	n := len(r.FCTus)
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i + 1)
	}
	series := []chart.Series{{Name: "NDP flows", X: x, Y: r.FCTus}}
	if n > 0 && r.OptimalUs > 0 {
		series = append(series, chart.Series{Name: "optimum (last flow)",
			X: []float64{1, float64(n)}, Y: []float64{r.OptimalUs, r.OptimalUs}})
	}
	title := fmt.Sprintf("ndpsim incast: %d × %d bytes, %s, %d hosts", r.Flows, r.SizeBytes, r.Topology, r.Hosts)
	if err := chart.Lines(file, title, "flow (first done first)", "completion (µs)", series); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	fmt.Fprintf(os.Stderr, "ndpsim: flow completion times written to %s\n", file)
	return nil
}

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

package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// A Table is one figure or table of a paper reproduced: our numbers beside the paper's.
// Cells are formatted text; "-" marks a value the paper does not state.
type Table struct {
	Name    string     `json:"name"` // the paper's figure or table, e.g. "HULL Figure 5"
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	// Notes explain the setup and every difference from the paper larger than 10%.
	Notes []string `json:"notes,omitempty"`
	// Plot, when set, is what the paper draws, from our runs.
	Plot *Plot `json:"-"`
}

// Plot is a figure's data: lines (X, Y) or, when CDF is set, samples drawn as CDFs.
type Plot struct {
	XLabel, YLabel string
	CDF            bool
	Series         []PlotSeries
}

// PlotSeries is one line of a Plot.
type PlotSeries struct {
	Name string
	X, Y []float64
}

// A Reproduction runs one paper's experiments.
type Reproduction struct {
	Name  string // command-line name
	Paper string
	Run   func() ([]Table, error)
}

// Reproductions lists the papers' experiments ndpsim reproduces.
func Reproductions() []Reproduction {
	return []Reproduction{
		{"hull", "HULL (NSDI 2012): bandwidth headroom with phantom queues and pacing", ReproduceHULL},
		{"d3", "D3 (SIGCOMM 2011): deadline-aware allocation and flow quenching", ReproduceD3},
		{"opf", "OPF (IFIP Networking 2024): opportunistic forwarding of pre-credit packets", ReproduceOPF},
		{"omnet", "NDP OMNeT++/INET model (2019): initial window and ECMP comparisons", ReproduceOMNeT},
	}
}

// FindReproduction returns the reproduction called name.
func FindReproduction(name string) (Reproduction, error) {
	var names []string
	for _, r := range Reproductions() {
		if r.Name == name {
			return r, nil
		}
		names = append(names, r.Name)
	}
	return Reproduction{}, fmt.Errorf("sim: no reproduction %q (have %s)", name, strings.Join(names, ", "))
}

// percentile returns the p-th percentile (0..100) of v by nearest rank; v is sorted in
// place. It returns NaN for no samples.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	sort.Float64s(v)
	i := int(math.Ceil(p/100*float64(len(v)))) - 1
	return v[min(max(i, 0), len(v)-1)]
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// diffPct is how far ours is from the paper's value, in percent of the paper's.
func diffPct(ours, paper float64) float64 { return (ours - paper) / paper * 100 }

func f1(x float64) string { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string { return fmt.Sprintf("%.2f", x) }

package main

import (
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/ndpstack/ndpstack/internal/chart"
)

// checkPNG fails unless file decodes as a PNG of chart's size.
func checkPNG(t *testing.T, file string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, format, err := image.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if format != "png" || cfg.Width != chart.Width || cfg.Height != chart.Height {
		t.Fatalf("%s: %s %dx%d, want png %dx%d", file, format, cfg.Width, cfg.Height, chart.Width, chart.Height)
	}
}

// TestRPCPlotSim runs `ndpperf rpc --plot` on its simulator path (what it
// does without root) and checks the figure.
func TestRPCPlotSim(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rpc.png")
	o, err := parseRPCFlags("rpc", []string{"--n", "200", "--rounds", "1", "--plot", file}, 100)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rpcSimFallback(o)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Results[0].samplesUs); n != 200 {
		t.Fatalf("%d samples for the plot, want 200", n)
	}
	if err := plotLatency(o.plot, "rpc", out.Results); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, file)
}

// TestIncastPlotSim: `ndpperf incast --plot` on its simulator path.
func TestIncastPlotSim(t *testing.T) {
	o, err := parseIncastFlags([]string{"--servers", "3", "--size", "64KiB", "--plot", "x.png"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := incastSimRun(o)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "incast.png")
	if err := plotIncast(file, out); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, file)
	if _, err := parseIncastFlags([]string{"--plot", "x.jpg"}); err == nil {
		t.Error("--plot x.jpg accepted")
	}
}

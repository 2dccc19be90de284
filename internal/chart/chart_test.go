package chart

import (
	"errors"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// checkPNG fails unless file decodes as a Width × Height PNG.
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
	if format != "png" || cfg.Width != Width || cfg.Height != Height {
		t.Fatalf("%s: %s %dx%d, want png %dx%d", file, format, cfg.Width, cfg.Height, Width, Height)
	}
}

var _ = png.Decode // registers the PNG decoder for image.DecodeConfig

func TestFigures(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	lat := func(base float64, n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = base * (1 + r.ExpFloat64()/4)
		}
		return v
	}
	cdf := filepath.Join(dir, "cdf.png")
	if err := CDF(cdf, "RPC latency", "µs", []Samples{{"ndp", lat(8, 1000)}, {"tcp", lat(60, 1000)}, {"empty", nil}}); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, cdf)

	lines := filepath.Join(dir, "lines.png")
	if err := Lines(lines, "incast", "round", "ms", []Series{
		{"ndp", []float64{1, 2, 3}, []float64{1.5, 1.4, 1.6}},
		{"tcp", []float64{1, 2, 3}, []float64{0.9, 1.0, 2.5}},
	}); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, lines)
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	if err := CDF(filepath.Join(dir, "a.png"), "", "", nil); !errors.Is(err, ErrNoData) {
		t.Errorf("CDF of nothing: %v", err)
	}
	if err := Lines(filepath.Join(dir, "a.png"), "", "", "", []Series{{"x", []float64{1}, nil}}); err == nil {
		t.Error("Lines with mismatched series succeeded")
	}
	if err := CDF(filepath.Join(dir, "a.svg"), "", "", []Samples{{"x", []float64{1}}}); err == nil {
		t.Error("CDF to a .svg succeeded")
	}
	if err := CDF(filepath.Join(dir, "no", "such", "a.png"), "", "", []Samples{{"x", []float64{1}}}); err == nil {
		t.Error("CDF into a missing directory succeeded")
	}
}

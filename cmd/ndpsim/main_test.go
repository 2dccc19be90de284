package main

import (
	"encoding/json"
	"image"
	_ "image/png"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ndpstack/ndpstack/internal/chart"
	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/internal/sim"
	"github.com/ndpstack/ndpstack/ndp"
)

func TestParseSizeAndRate(t *testing.T) {
	for in, want := range map[string]int64{"135KB": 135000, "1MB": 1000000, "4KiB": 4096, "9000": 9000, "1.5MB": 1500000, "2MiB": 2 << 20} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MB", "-1KB", "0", "x"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
	for in, want := range map[string]float64{"10G": 10e9, "100M": 100e6, "25e9": 25e9, "40Gbps": 40e9} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseRate("fast"); err == nil {
		t.Error("parseRate accepted nonsense")
	}
}

// The command prints one JSON object with the named fields.
func TestIncastJSON(t *testing.T) {
	out := capture(t, func() error {
		return runIncast([]string{"--senders", "7", "--size", "1MB", "--link", "10G", "--mtu", "9000", "--queue", "8", "--iw", "30", "--json"})
	})
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"last_fct_us", "optimal_us", "overhead_pct", "bytes_verified", "trimmed", "nacks", "bounced", "retransmits"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing %q in %s", k, out)
		}
	}
	if m["bytes_verified"] != true {
		t.Fatalf("bytes_verified = %v", m["bytes_verified"])
	}
	if o := m["overhead_pct"].(float64); o < 0 || o > 5 {
		t.Fatalf("overhead_pct = %v, want 0..5", o)
	}
}

func TestTransferTable(t *testing.T) {
	out := capture(t, func() error {
		return runTransfer([]string{"--size", "2MB", "--mtu", "1500", "--loss", "0.01", "--rto", "200us"})
	})
	if len(out) == 0 {
		t.Fatal("no table printed")
	}
}

func capture(t *testing.T, f func() error) []byte {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); done <- b }()
	ferr := f()
	os.Stdout = old
	w.Close()
	out := <-done
	if ferr != nil {
		t.Fatalf("run: %v\n%s", ferr, out)
	}
	return out
}

// The FatTree commands print one JSON object with the topology, per-flow throughput and
// trim-location fields.
func TestFatTreeCommandsJSON(t *testing.T) {
	for _, tc := range []struct {
		run  func([]string) error
		args []string
		keys []string
	}{
		{runPermutation, []string{"--topo", "fattree", "--k", "4", "--size", "1MB", "--ecmp", "path", "--json"},
			[]string{"utilization_pct", "min_flow_gbps", "flow_gbps", "uplink_trim_pct", "window_end_us"}},
		{runPermutation, []string{"--topo", "leafspine", "--leaves", "3", "--spines", "2", "--hosts-per-leaf", "2", "--size", "1MB", "--slow-core-link", "1G", "--json"},
			[]string{"utilization_pct", "paths_excluded"}},
		{runIncast, []string{"--topo", "fattree", "--k", "4", "--senders", "15", "--size", "135KB", "--json"},
			[]string{"bounced_pct", "trimmed_uplink", "trimmed_last_hop", "overhead_pct"}},
	} {
		out := capture(t, func() error { return tc.run(tc.args) })
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%v: not one JSON object: %v\n%s", tc.args, err, out)
		}
		for _, k := range append(tc.keys, "topology", "hosts", "bytes_verified") {
			if _, ok := m[k]; !ok {
				t.Errorf("%v: missing %q", tc.args, k)
			}
		}
		if m["bytes_verified"] != true {
			t.Fatalf("%v: bytes_verified = %v", tc.args, m["bytes_verified"])
		}
	}
	if err := runPermutation([]string{"--topo", "star"}); err == nil {
		t.Fatal("a permutation on a star was accepted")
	}
	if err := runIncast([]string{"--topo", "ring"}); err == nil {
		t.Fatal("an unknown topology was accepted")
	}
}

// TestPermutationPlot: `ndpsim permutation --plot FILE` writes a PNG of the
// figure size as well as its usual output.
func TestPermutationPlot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "perm.png")
	capture(t, func() error {
		return runPermutation([]string{"--topo", "fattree", "--k", "4", "--size", "200KB", "--ecmp", "path", "--json", "--plot", file})
	})
	checkPNG(t, file)
	if err := runPermutation([]string{"--topo", "fattree", "--k", "4", "--size", "100KB", "--plot", filepath.Join(t.TempDir(), "x.svg")}); err == nil {
		t.Error("--plot to a .svg file succeeded")
	}
}

// TestIncastPlot: `ndpsim incast --plot FILE` draws every flow's completion.
func TestIncastPlot(t *testing.T) {
	file := filepath.Join(t.TempDir(), "incast.png")
	capture(t, func() error {
		return runIncast([]string{"--senders", "7", "--size", "200KB", "--json", "--plot", file})
	})
	checkPNG(t, file)
	r, err := sim.RunIncast(sim.IncastConfig{Star: sim.StarConfig{LinkRate: 10e9, LinkDelay: 1000,
		Endpoint: ndp.Config{MTU: 9000, IW: 30}, Fabric: fabric.Config{DataQueue: 8}, Seed: 1}, Senders: 5, Size: 100e3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.FCTus) != 5 || r.FCTus[0] != r.FirstFCTus || r.FCTus[4] != r.LastFCTus {
		t.Fatalf("FCTus %v, first %v last %v", r.FCTus, r.FirstFCTus, r.LastFCTus)
	}
}

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
		t.Fatal(err)
	}
	if format != "png" || cfg.Width != chart.Width || cfg.Height != chart.Height {
		t.Fatalf("%s %dx%d, want png %dx%d", format, cfg.Width, cfg.Height, chart.Width, chart.Height)
	}
}

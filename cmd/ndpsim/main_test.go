package main

import (
	"encoding/json"
	"io"
	"os"
	"testing"
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

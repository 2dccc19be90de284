package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// TestLeafSpineSpin: the four stacks never spin on a machine with fewer
// CPUs (--spin auto, as the incast's), and --spin fixes it.
func TestLeafSpineSpin(t *testing.T) {
	o, err := parseLeafSpineFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := pickSpin(o.spin, o.spinFixed, 4, 2); got >= 0 {
		t.Errorf("auto, 4 stacks on 2 CPUs: spin %v, want never", got)
	}
	if got := pickSpin(o.spin, o.spinFixed, 4, 8); got != 0 {
		t.Errorf("auto, 4 stacks on 8 CPUs: spin %v, want the default", got)
	}
	for arg, want := range map[string]time.Duration{"never": -1, "30us": 30 * time.Microsecond} {
		o, err := parseLeafSpineFlags([]string{"--spin", arg})
		if err != nil || o.stackSpin() != want {
			t.Errorf("--spin %s: %v, %v", arg, o.stackSpin(), err)
		}
	}
}

func TestParseLeafSpineFlags(t *testing.T) {
	o, err := parseLeafSpineFlags([]string{"--link", "1G", "--spines", "4", "--degrade", "10"})
	if err != nil || o.rate != 1e9 || o.spines != 4 || o.degrade != 10 || o.rto <= 0 || o.hostQueue != 256 || o.switchTick != 0 {
		t.Fatalf("%+v, %v", o, err) // auto: no tick at 1 Gb/s
	}
	if o, err := parseLeafSpineFlags([]string{"--link", "100M"}); err != nil || o.switchTick != 50*time.Microsecond {
		t.Fatalf("100M: tick %v, %v", o.switchTick, err)
	}
	if o, err := parseLeafSpineFlags([]string{"--link", "100M", "--switch-tick", "0"}); err != nil || o.switchTick != 0 {
		t.Fatalf("--switch-tick 0: tick %v, %v", o.switchTick, err)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--spines", "1"}}, {[]string{"--degrade", "1"}}, {[]string{"--hosts-per-leaf", "0"}},
		{[]string{"--link", "fast"}}, {[]string{"--size", "0"}}, {[]string{"extra"}}, {[]string{"--iw", "-1"}},
		{[]string{"--switch-tick", "2ms"}}, {[]string{"--switch-tick", "-1us"}}, {[]string{"--switch-tick", "often"}}, {[]string{"--spin", "0s"}}, {[]string{"--spin", "sometimes"}},
	} {
		if _, err := parseLeafSpineFlags(tc.args); err == nil {
			t.Errorf("%q accepted", tc.args)
		}
	}
}

// TestLeafSpineIW: the stacks' initial window covers the testbed's round trip
// plus 10 ms at the link rate, between the paper's 30 and the receive buffer.
func TestLeafSpineIW(t *testing.T) {
	for _, tc := range []struct {
		rate int64
		mtu  int
		want int
	}{{20e6, 3500, 30}, {50e6, 3500, 38}, {100e6, 3500, 56}, {200e6, 3500, 76}, {100e6, 1500, 102}} {
		if got := leafSpineIW(tc.rate, tc.mtu); got != tc.want {
			t.Errorf("leafSpineIW(%d, %d) = %d, want %d", tc.rate, tc.mtu, got, tc.want)
		}
	}
	if o, err := parseLeafSpineFlags([]string{"--link", "100M", "--iw", "30"}); err != nil || o.iw != 30 {
		t.Fatalf("--iw 30: %+v, %v", o, err)
	}
	if o, err := parseLeafSpineFlags([]string{"--link", "100M"}); err != nil || o.iw != 56 {
		t.Fatalf("--link 100M: iw %d, %v", o.iw, err)
	}
}

// TestLeafSpineTestbed runs one small permutation of each transport through
// a two-spine fabric: every flow verified, both spines carry NDP frames.
func TestLeafSpineTestbed(t *testing.T) {
	testbed.RequireRoot(t)
	timeline := filepath.Join(t.TempDir(), "timeline.csv")
	o, err := parseLeafSpineFlags([]string{"--link", "200M", "--size", "256KiB", "--runs", "1", "--timeline", timeline})
	if err != nil {
		t.Fatal(err)
	}
	out, err := leafSpineTestbed(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Runs) != 2 || len(out.Summary) != 2 {
		t.Fatalf("runs %+v", out.Runs)
	}
	for _, r := range out.Runs {
		if len(r.Flows) != 4 {
			t.Fatalf("%s: %d flows", r.Transport, len(r.Flows))
		}
		for _, f := range r.Flows {
			if !f.Verified || f.Fraction <= 0 || f.FirstByteMs <= 0 || f.FirstByteMs >= f.Seconds*1e3 {
				t.Errorf("%s flow %+v", r.Transport, f)
			}
		}
	}
	// The timeline: a header, then samples of the 4 host ports and 4 NIC
	// links in both runs.
	b, err := os.ReadFile(timeline)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 1+2*8 || !strings.HasPrefix(lines[0], "transport,run,us,port") {
		t.Fatalf("timeline: %d lines, header %q", len(lines), lines[0])
	}
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 9 {
			t.Fatalf("timeline row %q", l)
		}
		seen[f[0]+" "+f[3]] = true
	}
	if len(seen) != 16 {
		t.Errorf("timeline covers %d transport/port pairs, want 16: %v", len(seen), seen)
	}
	for _, l := range out.Runs[0].Links {
		if strings.HasPrefix(l.Name, "leaf") && l.Frames == 0 {
			t.Errorf("ndp: %s carried nothing", l.Name)
		}
	}
}

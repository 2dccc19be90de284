package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

func TestParseThroughputFlags(t *testing.T) {
	def := throughputOpts{size: 100e6, rate: 10e9, runs: 3, poll: "adaptive", mode: "embedded"}
	for _, tc := range []struct {
		args    []string
		want    throughputOpts
		wantErr string
	}{
		{args: nil, want: def},
		{args: []string{"--size", "1GiB", "--mtu", "3826", "--rate", "40G", "--runs", "5", "--poll", "busy", "--json"},
			want: throughputOpts{size: 1 << 30, mtu: 3826, rate: 40e9, runs: 5, poll: "busy", mode: "embedded", json: true}},
		{args: []string{"--mode", "daemon"}, want: throughputOpts{size: 100e6, rate: 10e9, runs: 3, poll: "adaptive", mode: "daemon"}},
		{args: []string{"--mode", "kernel"}, wantErr: "--mode"},
		{args: []string{"--compare", "xdp"}, want: throughputOpts{size: 100e6, rate: 10e9, runs: 3, poll: "adaptive", mode: "embedded", xdp: true}},
		{args: []string{"--compare", "tcp"}, wantErr: "--compare"},
		{args: []string{"--compare", "xdp", "--mtu", "9000"}, wantErr: "UMEM frame"},
		{args: []string{"--size", "0"}, wantErr: "bad size"},
		{args: []string{"--size", "5GiB"}, wantErr: "--size"},
		{args: []string{"--mtu", "100"}, wantErr: "--mtu"},
		{args: []string{"--rate", "10"}, wantErr: "bad rate"},
		{args: []string{"--runs", "0"}, wantErr: "--runs"},
		{args: []string{"--poll", "sometimes"}, wantErr: "--poll"},
		{args: []string{"--size"}, wantErr: "needs an argument"},
	} {
		got, err := parseThroughputFlags(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}

func TestByteSizeAndRate(t *testing.T) {
	for s, want := range map[string]int64{"9000": 9000, "64KiB": 64 << 10, "1MB": 1e6, "1.5MB": 1.5e6, "2GiB": 2 << 30, "100b": 100} {
		if got, err := parseByteSize(s); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "-5", "0.5", "KB", "1XB", "NaN"} {
		if _, err := parseByteSize(s); err == nil {
			t.Errorf("parseByteSize(%q) accepted", s)
		}
	}
	for s, want := range map[string]int64{"1G": 1e9, "500M": 500e6, "25e9": 25e9, "10Gbps": 10e9, "2.5G": 2.5e9} {
		if got, err := parseBitRate(s); err != nil || got != want {
			t.Errorf("parseBitRate(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "fast", "100K", "2T", "-1G"} {
		if _, err := parseBitRate(s); err == nil {
			t.Errorf("parseBitRate(%q) accepted", s)
		}
	}
}

// TestThroughputTestbed transfers 8 MB each way once: both transports
// deliver every byte (SHA-256 checked inside), and the NDP counters
// account for the data.
func TestThroughputTestbed(t *testing.T) {
	testbed.RequireRoot(t)
	const size = 8 << 20
	out, err := throughputTestbed(throughputOpts{size: size, rate: 10e9, runs: 1, poll: "adaptive"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Runs) != 2 || out.Runs[0].Transport != "ndp" || out.Runs[1].Transport != "tcp" || len(out.Summary) != 2 {
		t.Fatalf("output %+v", out)
	}
	for _, r := range out.Runs {
		if !r.Verified || r.Bytes != size || r.Seconds <= 0 || r.Mbps <= 0 {
			t.Errorf("%+v", r)
		}
		// Moving and hashing 8 MiB takes the process at least a few ms
		// of CPU, and no more CPU time than the machine's CPUs have in the run's
		// wall time plus the dial's and the stacks' opening.
		if r.CPUMs < 1 || r.CPUMs > float64(runtime.NumCPU())*1000*(r.Seconds+5) {
			t.Errorf("%s: process CPU %.1f ms over a %.3f s run", r.Transport, r.CPUMs, r.Seconds)
		}
	}
	if out.NDPOverTCP <= 0 || out.NDPOverPullRate <= 0 {
		t.Errorf("ratios %v %v", out.NDPOverTCP, out.NDPOverPullRate)
	}
	s, r := out.Runs[0].Sender, out.Runs[0].Receiver
	if s == nil || r == nil {
		t.Fatal("no NDP counters")
	}
	// At MTU 1500 a packet carries under 1500 bytes: at least size/1500 DATA
	// packets left the sender and (first copies) reached the receiver.
	if min := uint64(size / 1500); s.DataOut < min || r.DataIn < min || s.PulledOut == 0 || r.PullsOut == 0 || s.TxKicks == 0 {
		t.Errorf("counters do not account for %d bytes: sender %+v receiver %+v", size, *s, *r)
	}
	t.Logf("ndp %.0f Mb/s, tcp %.0f Mb/s; sender %+v; receiver %+v", out.Runs[0].Mbps, out.Runs[1].Mbps, *s, *r)
}

// TestThroughputCompareXDP adds the raw AF_XDP round: it reports a received
// rate of its own and the ratios against it.
func TestThroughputCompareXDP(t *testing.T) {
	testbed.RequireRoot(t)
	const size = 2 << 20
	out, err := throughputTestbed(throughputOpts{size: size, rate: 10e9, runs: 1, poll: "adaptive", xdp: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Runs) != 3 || out.Runs[2].Transport != "xdp" {
		t.Fatalf("runs %+v", out.Runs)
	}
	x := out.Runs[2]
	if x.XDP == nil || x.XDP.ReceivedFrames == 0 || x.Mbps <= 0 || x.Bytes != int64(x.XDP.ReceivedFrames)*(1500-28) {
		t.Fatalf("xdp run %+v", x)
	}
	if out.NDPOverXDP <= 0 || out.TCPOverXDP <= 0 {
		t.Errorf("ratios ndp/xdp %v tcp/xdp %v", out.NDPOverXDP, out.TCPOverXDP)
	}
	t.Logf("ndp %.0f, tcp %.0f, raw AF_XDP %.0f Mb/s", out.Runs[0].Mbps, out.Runs[1].Mbps, x.Mbps)
}

// TestThroughputSim runs the unprivileged fallback: the simulated transfer
// is verified and runs near the simulated link rate.
func TestThroughputSim(t *testing.T) {
	out, err := throughputSimRun(throughputOpts{size: 4 << 20, rate: 10e9, runs: 1, poll: "adaptive"})
	if err != nil {
		t.Fatal(err)
	}
	r := out.Runs[0]
	if !r.Verified || r.Mbps < 5000 || r.Mbps > 10000 {
		t.Fatalf("%+v", r)
	}
}

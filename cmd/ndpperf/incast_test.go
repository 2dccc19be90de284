package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

func TestParseIncastFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    incastOpts
		wantErr string
	}{
		{args: nil, want: incastOpts{servers: 4, size: 64 << 10, rounds: 20, rate: 10e9}},
		{args: []string{"--servers", "8", "--size", "1MB", "--rounds", "5", "--mtu", "3000", "--rate", "25G", "--json"},
			want: incastOpts{servers: 8, size: 1e6, rounds: 5, mtu: 3000, rate: 25e9, json: true}},
		{args: []string{"--size", "32KiB"}, want: incastOpts{servers: 4, size: 32 << 10, rounds: 20, rate: 10e9}},
		{args: []string{"--spin", "never"}, want: incastOpts{servers: 4, size: 64 << 10, rounds: 20, rate: 10e9, spin: -1, spinFixed: true}},
		{args: []string{"--spin", "20us"}, want: incastOpts{servers: 4, size: 64 << 10, rounds: 20, rate: 10e9, spin: 20 * time.Microsecond, spinFixed: true}},
		{args: []string{"--servers", "0"}, wantErr: "--servers"},
		{args: []string{"--servers", "17"}, wantErr: "--servers"},
		{args: []string{"--size", "0"}, wantErr: "bad size"},
		{args: []string{"--size", "1GB"}, wantErr: "--size"},
		{args: []string{"--size", "lots"}, wantErr: "bad size"},
		{args: []string{"--rounds", "0"}, wantErr: "--rounds"},
		{args: []string{"--mtu", "1000"}, wantErr: "--mtu"},
		{args: []string{"--mtu", "9001"}, wantErr: "--mtu"},
		{args: []string{"--rate", "fast"}, wantErr: "bad rate"},
		{args: []string{"--spin", "0"}, wantErr: "--spin"},
		{args: []string{"--spin", "often"}, wantErr: "--spin"},
		{args: []string{"extra"}, wantErr: "unexpected"},
	} {
		got, err := parseIncastFlags(tc.args)
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

func TestIncastStackSpin(t *testing.T) {
	auto := incastOpts{}
	if got := auto.stackSpin(5, 2); got >= 0 {
		t.Errorf("auto, 5 stacks on 2 CPUs: spin %v, want never (negative)", got)
	}
	if got := auto.stackSpin(5, 16); got != 0 {
		t.Errorf("auto, 5 stacks on 16 CPUs: spin %v, want the default (0)", got)
	}
	fixed := incastOpts{spin: 20 * time.Microsecond, spinFixed: true}
	if got := fixed.stackSpin(5, 2); got != fixed.spin {
		t.Errorf("--spin 20us: spin %v", got)
	}
}

// TestIncastTestbed runs a small incast (bridge testbed, NDP and kernel
// TCP) with a non-default MTU: every round completes with every byte, and
// the NDP counters account for the responses.
func TestIncastTestbed(t *testing.T) {
	testbed.RequireRoot(t)
	const k, size, rounds = 2, 48 << 10, 3
	out, err := incastTestbed(incastOpts{servers: k, size: size, rounds: rounds, mtu: 3000, rate: 10e9})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 || out.Results[0].Transport != "ndp" || out.Results[1].Transport != "tcp" || out.MTU != 3000 {
		t.Fatalf("results %+v", out)
	}
	for _, r := range out.Results {
		if r.Rounds != rounds || r.MedianMs <= 0 || r.MedianMs > r.P90Ms || r.P90Ms > r.MaxMs || r.GoodputMbps <= 0 ||
			r.ReceivedBytes != k*size*rounds {
			t.Errorf("%+v", r)
		}
	}
	ndp := out.Results[0]
	if ndp.Client == nil || ndp.ServerSummed == nil {
		t.Fatal("no NDP counters")
	}
	// Every response byte crossed as DATA: the client received at least
	// k x rounds x size / (3000-byte MTU) data packets, the servers sent as many.
	minPkts := uint64(k * rounds * size / 3000)
	if ndp.Client.DataIn < minPkts || ndp.ServerSummed.DataOut < minPkts || ndp.Client.TxKicks == 0 || ndp.Client.RxFrames == 0 {
		t.Errorf("counters do not account for %d x %d x %d bytes: client %+v servers %+v", rounds, k, size, *ndp.Client, *ndp.ServerSummed)
	}
	// The optimum: the bytes at the pull rate plus a measured round trip.
	bytesMs := float64(k*size) * 8 / 10e9 * 1000
	if out.RTTMs <= 0 || out.OptimalMs < bytesMs+out.RTTMs-0.002 || out.OptimalMs > bytesMs+out.RTTMs+0.002 ||
		out.NDPOverOptimal <= 0 || out.NDPOverPullRate <= 0 || out.NDPOverTCP <= 0 {
		t.Errorf("optimum %v ms (bytes alone %.3f ms, rtt %v ms), ratios %v %v %v", out.OptimalMs, bytesMs, out.RTTMs,
			out.NDPOverOptimal, out.NDPOverPullRate, out.NDPOverTCP)
	}
	t.Logf("%+v\nclient %+v\nservers %+v", out.Results, *ndp.Client, *ndp.ServerSummed)
	// --plot: one point per round per transport.
	for _, r := range out.Results {
		if len(r.roundsMs) != rounds {
			t.Errorf("%s: %d rounds to plot, want %d", r.Transport, len(r.roundsMs), rounds)
		}
	}
	file := filepath.Join(t.TempDir(), "incast.png")
	if err := plotIncast(file, out); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, file)
}

func TestIncastAsked(t *testing.T) {
	for _, tc := range []struct {
		req  string
		want int
	}{
		{"GET 1", 1}, {"GET 0", 0}, {"GET 65536", 65536}, {"GET 70000", 65536}, {"GET 99999999999999999999", 65536},
		{"GET", 65536}, {"GET ", 65536}, {"GET 12x", 65536}, {"PUT 5", 65536}, {"", 65536},
	} {
		if got := incastAsked([]byte(tc.req), 65536); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.req, got, tc.want)
		}
	}
}

// TestIncastSim runs the unprivileged fallback: the simulated incast
// delivers every byte, no faster than the link allows.
func TestIncastSim(t *testing.T) {
	o := incastOpts{servers: 4, size: 64 << 10, rounds: 1, rate: 10e9}
	out, err := incastSimRun(o)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Results[0]
	minMs := float64(o.servers*o.size) * 8 / float64(o.rate) * 1000
	if r.MedianMs < minMs || r.MedianMs > 3*minMs || r.GoodputMbps <= 0 || r.Client == nil {
		t.Fatalf("%+v (the bytes alone take %.3f ms)", r, minMs)
	}
	if out.OptimalMs < minMs || out.NDPOverOptimal < 1 || out.NDPOverPullRate <= 0 || out.NDPOverPullRate > 1 {
		t.Errorf("optimum %v ms, ratios %v %v", out.OptimalMs, out.NDPOverOptimal, out.NDPOverPullRate)
	}
}

package main

import (
	"testing"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

func TestParseRPCFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--compare", "xdp,tcp,tcp-newconn,tfo", "--json"}, true},
		{[]string{"--compare", ""}, true},
		{[]string{"--compare", "udp"}, false},
		{[]string{"--mode", "daemon"}, true},
		{[]string{"--mode", "kernel"}, false},
		{[]string{"--poll", "adaptive", "--spin", "50us"}, true},
		{[]string{"--poll", "lazy"}, false},
		{[]string{"--size", "4"}, false},
		{[]string{"--n", "10", "--rounds", "20"}, false},
	} {
		_, err := parseRPCFlags("rpc", tc.args, 100)
		if (err == nil) != tc.ok {
			t.Errorf("parseRPCFlags(%q) = %v", tc.args, err)
		}
	}
}

// TestRPCTestbed runs every transport of `ndpperf rpc` briefly on a real
// testbed: each must complete its RPCs without loss.
func TestRPCTestbed(t *testing.T) {
	testbed.RequireRoot(t)
	for _, poll := range []string{"busy", "adaptive"} {
		o := rpcOpts{size: 1024, n: 300, warmup: 50, rounds: 2, compare: []string{"xdp", "tcp", "tcp-newconn", "tfo"},
			mode: "embedded", poll: poll, spin: 200e3}
		out, err := rpcTestbed(o)
		if err != nil {
			t.Fatalf("%s: %v", poll, err)
		}
		if len(out.Results) != 5 {
			t.Fatalf("%d results", len(out.Results))
		}
		for _, r := range out.Results {
			if r.N != o.n || r.Lost != 0 || r.P50us <= 0 || r.P50us > r.P99us {
				t.Errorf("%s %s: %+v", poll, r.Transport, r)
			}
		}
		t.Logf("%s: ndp p50 %.1fµs, xdp %.1fµs, tcp-newconn %.1fµs", poll, out.Results[0].P50us, out.Results[1].P50us, out.Results[3].P50us)
	}
}

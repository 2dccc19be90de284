package main

import (
	"testing"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

func TestParseHULLFlags(t *testing.T) {
	o, err := parseHULLFlags([]string{"--gamma", "1,0.9", "--link", "1G"})
	if err != nil || len(o.gammas) != 2 || o.gammas[1] != 0.9 || o.link != 1e9 || o.rto <= 0 {
		t.Fatalf("%+v, %v", o, err)
	}
	if o.rpcRate != 0 || o.pqBytes != 1000 {
		t.Errorf("defaults: rpc rate %v, phantom threshold %d; want 0 (closed loop) and 1000", o.rpcRate, o.pqBytes)
	}
	if o, err := parseHULLFlags([]string{"--rpc-rate", "20", "--phantom-threshold", "3000"}); err != nil || o.rpcRate != 20 || o.pqBytes != 3000 {
		t.Errorf("--rpc-rate 20 --phantom-threshold 3000: %+v, %v", o, err)
	}
	for _, args := range [][]string{{"--gamma", "1.2"}, {"--gamma", "x"}, {"--phantom-gamma", "2"}, {"--n", "1", "--rounds", "2"}, {"--size", "0"}, {"extra"},
		{"--rpc-rate", "-1"}, {"--rpc-rate", "NaN"}, {"--phantom-threshold", "0"}} {
		if _, err := parseHULLFlags(args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// TestHULLTestbed runs a few RPCs beside a bulk transfer for two gammas:
// every RPC answered, the bulk flowing, the result rows filled.
func TestHULLTestbed(t *testing.T) {
	testbed.RequireRoot(t)
	for _, loop := range []string{"0", "200"} {
		t.Run("rpc-rate="+loop, func(t *testing.T) { hullTestbedCheck(t, loop) })
	}
}

func hullTestbedCheck(t *testing.T, rpcRate string) {
	o, err := parseHULLFlags([]string{"--link", "200M", "--n", "40", "--rounds", "1", "--rpc-rate", rpcRate})
	if err != nil {
		t.Fatal(err)
	}
	out, err := hullTestbed(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 {
		t.Fatalf("%+v", out)
	}
	for _, r := range out.Results {
		if r.RPC.N != 40 || r.RPC.P99us <= 0 || r.BulkMbps <= 0 || r.RPCMbps <= 0 || r.SwitchLostMs < 0 {
			t.Errorf("gamma %v: %+v", r.Gamma, r)
		}
		// The switch saw the bulk and the responses at host 0's port, and
		// the stacks' counters cover the same window.
		if r.NDPArrivals == 0 || r.Receiver.DataIn == 0 || r.Sender.PulledOut == 0 || r.Receiver.PullsOut == 0 || r.Server.DataOut == 0 {
			t.Errorf("gamma %v: counters %+v", r.Gamma, r)
		}
		// The turn's RPCs count as stall-free exactly when the switch lost
		// no link time in it.
		if (r.StallFreeTurns == 1) != (r.RPCStallFree != nil) || (r.StallFreeTurns == 1) != (r.SwitchLostMs == 0) {
			t.Errorf("gamma %v: %d stall-free turns, lost %.1f ms, stall-free RPCs %+v", r.Gamma, r.StallFreeTurns, r.SwitchLostMs, r.RPCStallFree)
		}
	}
}

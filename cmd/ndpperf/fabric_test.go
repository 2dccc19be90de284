package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

func TestParseFabricFlags(t *testing.T) {
	o, err := parseThroughputFlags([]string{"--fabric", "switch", "--link", "100M"})
	if err != nil || o.fabricFlags != (fabricFlags{fabric: "switch", link: 100e6, personality: "ndp", tick: autoTick}) || o.rate != 100e6 {
		t.Errorf("throughput --fabric switch --link 100M: %+v, %v (want the pull rate at the link's)", o, err)
	}
	o, err = parseThroughputFlags([]string{"--fabric", "switch", "--link", "100M", "--rate", "50M", "--host-queue", "64", "--personality", "commodity"})
	if err != nil || o.rate != 50e6 || o.hostQueue != 64 || o.commodityTrim().TrimDSCPs == nil || o.rto() <= 0 {
		t.Errorf("--rate kept, commodity: %+v, %v", o, err)
	}
	if o, err := parseThroughputFlags(nil); err != nil || o.on() || o.rto() != 0 || o.commodityTrim().TrimDSCPs != nil {
		t.Errorf("default: %+v, %v (want the veth pair)", o, err)
	}
	for _, args := range [][]string{{"--pull-batch", "2"}, {"--fabric", "switch", "--pull-batch", "2"}} {
		if o, err := parseIncastFlags(args); err != nil || o.pullBatch != 2 {
			t.Errorf("incast %q: pull batch %d, %v", args, o.pullBatch, err)
		}
	}
	p, err := parsePriorityFlags([]string{"--fabric", "switch", "--link", "1G", "--pcap", "/tmp/x"})
	if err != nil || !p.on() || p.rate != 1e9 || p.pcap != "/tmp/x" {
		t.Errorf("priority --fabric switch --link 1G: %+v, %v", p, err)
	}
	for _, tc := range []struct {
		parse   func([]string) error
		args    []string
		wantErr string
	}{
		{throughputParse, []string{"--fabric", "bridge"}, "want veth or switch"},
		{throughputParse, []string{"--fabric", "switch", "--link", "10"}, "bad rate"},
		{throughputParse, []string{"--fabric", "switch", "--link", "500G"}, "--link"},
		{throughputParse, []string{"--fabric", "switch", "--personality", "p4"}, "--personality"},
		{throughputParse, []string{"--fabric", "switch", "--host-queue", "-1"}, "--host-queue"},
		{throughputParse, []string{"--fabric", "switch", "--mode", "daemon"}, "--mode daemon"},
		{priorityParse, []string{"--fabric", "veth"}, "want bridge or switch"},
		{incastParse, []string{"--fabric", "switch", "--personality", "x"}, "--personality"},
		{incastParse, []string{"--fabric", "switch", "--pull-batch", "17"}, "--pull-batch"},
		{priorityParse, []string{"--pull-batch", "-1"}, "--pull-batch"},
	} {
		if err := tc.parse(tc.args); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.wantErr)
		}
	}
}

func throughputParse(a []string) error { _, err := parseThroughputFlags(a); return err }
func priorityParse(a []string) error   { _, err := parsePriorityFlags(a); return err }
func incastParse(a []string) error     { _, err := parseIncastFlags(a); return err }

// TestThroughputSwitch: one transfer per transport through ndpswitch at
// 200 Mb/s: both verified, the switch's counters over each run, kernel
// TCP's retransmission counters, and the simulator's run beside.
func TestThroughputSwitch(t *testing.T) {
	testbed.RequireRoot(t)
	o, err := parseThroughputFlags([]string{"--fabric", "switch", "--link", "200M", "--host-queue", "64", "--size", "256KB", "--runs", "1"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := throughputTestbed(o)
	if err != nil {
		t.Fatal(err)
	}
	if out.Fabric != "switch" || out.LinkBps != 200e6 || len(out.Runs) != 2 || out.Sim == nil || !out.Sim.Verified || out.SimOverSwitch <= 0 {
		t.Fatalf("%+v", out)
	}
	for _, r := range out.Runs {
		if !r.Verified || r.Switch == nil || r.Switch.RxFrames == 0 {
			t.Errorf("%s: %+v", r.Transport, r)
		}
		if (r.Transport == "tcp") != (r.TCP != nil) || (r.Transport == "ndp") != (r.Sender != nil) {
			t.Errorf("%s: counters %+v", r.Transport, r)
		}
	}
}

// TestPrioritySwitch: the policies and kernel TCP through ndpswitch, one
// round each: every flow of every row delivered (the rounds check bytes
// and hashes), the switch's counters per row, TCP's counters on its row,
// and the simulator's rows beside. Whether flow 0 meets its deadline is
// timing on a loaded machine, reported and not asserted.
func TestPrioritySwitch(t *testing.T) {
	testbed.RequireRoot(t)
	o, err := parsePriorityFlags([]string{"--fabric", "switch", "--link", "100M", "--senders", "2", "--size", "256KB", "--rounds", "1", "--deadline", "10"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := priorityTestbed(o)
	if err != nil {
		t.Fatal(err)
	}
	if out.Fabric != "switch" || len(out.Policies) != 4 || out.Policies[3].Policy != "tcp" || out.Sim == nil || len(out.Sim.Policies) != 3 {
		t.Fatalf("%+v", out)
	}
	for _, p := range out.Policies {
		t.Logf("%s: flow 0 %.1f ms, deadline met %d/1, switch %+v", p.Policy, p.Flows[0].MedianMs, p.Flow0DeadlineMet, p.Switch)
		if len(p.Flows) != 2 || p.Switch == nil || p.Switch.RxFrames == 0 || p.MedianRoundMs <= 0 {
			t.Errorf("%s: %+v", p.Policy, p)
		}
		if (p.Policy == "tcp") != (p.TCP != nil) || (p.Policy == "tcp") == (p.Receiver != nil) {
			t.Errorf("%s: counters %+v", p.Policy, p)
		}
	}
	for _, f := range out.Policies[3].Flows {
		if f.Quenched != 0 || f.MinMs <= 0 {
			t.Errorf("tcp flow %d: %+v", f.Flow, f)
		}
	}
}

// TestRPCSwitch: NDP and kernel TCP RPCs through ndpswitch at 1 Gb/s, one
// pair of hosts carrying both: every RPC answered, the switch's counters
// and the simulator's latencies beside.
func TestRPCSwitch(t *testing.T) {
	testbed.RequireRoot(t)
	if _, err := parseRPCFlags("rpc", []string{"--fabric", "switch", "--compare", "xdp"}, 100); err == nil || !strings.Contains(err.Error(), "--fabric switch compares") {
		t.Errorf("xdp through the switch: %v", err)
	}
	o, err := parseRPCFlags("rpc", []string{"--fabric", "switch", "--link", "1G", "--n", "200", "--warmup", "50", "--rounds", "2", "--compare", "tcp"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	if o.rate != 1e9 || o.rto() <= 0 {
		t.Fatalf("%+v", o)
	}
	out, err := rpcTestbed(o)
	if err != nil {
		t.Fatal(err)
	}
	if out.Fabric != "switch" || len(out.Results) != 2 || out.Switch == nil || out.Switch.RxFrames == 0 || out.Sim == nil || out.Sim.N != 200 {
		t.Fatalf("%+v", out)
	}
	for _, r := range out.Results {
		if r.N != 200 || r.Lost != 0 || r.P50us <= 0 {
			t.Errorf("%s: %+v", r.Transport, r)
		}
	}
}

// TestSwitchTickFor: auto gives the switch a 50 µs tick where a full frame
// takes 100 µs or more on a port, none at faster rates; the flag takes auto
// or 0..1ms.
func TestSwitchTickFor(t *testing.T) {
	for _, tc := range []struct {
		rate int64
		mtu  int
		want time.Duration
	}{
		{1e9, 1500, 0}, {200e6, 1500, 0}, {100e6, 0, 50 * time.Microsecond}, {100e6, 1500, 50 * time.Microsecond},
		{10e6, 1500, 50 * time.Microsecond}, {200e6, 3500, 50 * time.Microsecond}, {1e9, 3500, 0},
	} {
		if got := switchTickFor(tc.rate, tc.mtu); got != tc.want {
			t.Errorf("rate %d mtu %d: %v, want %v", tc.rate, tc.mtu, got, tc.want)
		}
	}
	for s, want := range map[string]time.Duration{"auto": autoTick, "0": 0, "20us": 20 * time.Microsecond, "1ms": time.Millisecond} {
		if got, err := parseSwitchTick(s); err != nil || got != want {
			t.Errorf("%q: %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "-1us", "2ms", "often"} {
		if _, err := parseSwitchTick(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	f := fabricFlags{fabric: "switch", link: 100e6, personality: "ndp", tick: autoTick}
	if c := f.switchConfig(1500); c.Tick != 50*time.Microsecond {
		t.Errorf("auto at 100M: config tick %v", c.Tick)
	}
	f.tick = 0
	if c := f.switchConfig(1500); c.Tick != 0 {
		t.Errorf("--switch-tick 0 at 100M: config tick %v", c.Tick)
	}
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/ndpstack/ndpstack/internal/sim"
)

// demo: the README's main job. It builds veth testbeds in network
// namespaces, runs a short RPC comparison (ndpperf rpc with fewer RPCs) and
// a small incast (incast.go's incastTestbed: K servers answer one client at
// once through a Linux bridge, NDP and kernel TCP side by side), prints a table and removes
// everything it created. Not root: the same workloads run on the simulator,
// with a message saying so.

func init() {
	register(&subcommand{
		name:    "demo",
		summary: "build a veth testbed, compare NDP RPC latency and incast with kernel TCP, print a table, clean up",
		run:     runDemo,
	})
}

func runDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	n := fs.Int("n", 2000, "RPCs per transport in the latency comparison")
	servers := fs.Int("servers", 4, "incast servers")
	size := fs.Int("size", 64<<10, "incast response bytes per server")
	rounds := fs.Int("rounds", 100, "incast rounds (medians of fewer vary run to run on a shared machine)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *servers < 1 || *servers > 16 || *size < 1 || *rounds < 1 || *n < 10 {
		return errors.New("want 1..16 servers, positive size and rounds, n >= 10")
	}
	if os.Geteuid() != 0 {
		return demoSim(*n, *servers, *size, *asJSON)
	}
	fmt.Fprintln(os.Stderr, "ndpperf demo: building a two-namespace veth testbed for the RPC comparison...")
	o := rpcOpts{size: 1024, n: *n, warmup: *n / 10, rounds: 4, compare: []string{"xdp", "tcp", "tcp-newconn", "tfo"}, mode: "embedded", poll: "busy"}
	rpc, err := rpcTestbed(o)
	if err != nil {
		return fmt.Errorf("rpc comparison: %w", err)
	}
	fmt.Fprintf(os.Stderr, "ndpperf demo: building a %d-to-1 incast testbed (%d namespaces and a bridge)...\n", *servers, *servers+2)
	inc, err := incastTestbed(incastOpts{servers: *servers, size: *size, rounds: *rounds, rate: 10e9})
	if err != nil {
		return fmt.Errorf("incast: %w", err)
	}
	fmt.Fprintln(os.Stderr, "ndpperf demo: testbeds removed.")
	return printDemo(rpc, inc.Results, *asJSON)
}

func printDemo(rpc rpcOutput, inc []incastResult, asJSON bool) error {
	if asJSON {
		return printJSON(struct {
			RPC    rpcOutput      `json:"rpc"`
			Incast []incastResult `json:"incast"`
		}{rpc, inc})
	}
	fmt.Printf("RPC latency, %d-byte request and response (%s)\n", rpc.Size, rpc.Setup)
	if err := printRPC(rpc, false); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println("Incast: one client asks every server at once; time until the last response is complete")
	printIncastTable(inc)
	fmt.Println("(ndpperf incast runs this alone, with the NDP stacks' counters and --mtu)")
	return nil
}

// demoSim is the unprivileged fallback: the same RPC and incast workloads on
// the simulator.
func demoSim(n, servers, size int, asJSON bool) error {
	fmt.Fprintln(os.Stderr, "ndpperf demo: not root, so no veth testbed (network namespaces and AF_XDP need root).")
	fmt.Fprintln(os.Stderr, "  Running the same workloads on the simulator instead: real ndp endpoints and pull queues,")
	fmt.Fprintln(os.Stderr, "  hosts on one NDP switch (10 Gb/s links, 1 µs delay), virtual time. Kernel TCP needs root; skipped.")
	r, err := sim.RunRPC(sim.RPCConfig{Star: simStar(10e9, 1500), Size: 1024, N: n})
	if err != nil {
		return err
	}
	rtts := make([]time.Duration, len(r.Latencies))
	for i, l := range r.Latencies {
		rtts[i] = time.Duration(l)
	}
	rpc := rpcOutput{Results: []latencyResult{summarize("ndp", rtts, 0, "simulator, new connection per RPC")}, Size: 1024, Rounds: 1,
		Setup: "simulator: not root, no testbed"}
	inc, err := incastSimRun(incastOpts{servers: servers, size: size, rounds: 1, rate: 10e9})
	if err != nil {
		return err
	}
	return printDemo(rpc, inc.Results, asJSON)
}

package main

import (
	"fmt"
	"os"
	"time"

	"github.com/ndpstack/ndpstack/internal/sim"
)

// rpcSimFallback runs the ndp RPC workload on the simulator (two hosts on
// one NDP switch, 10 Gb/s links, 1 µs each) when the process cannot build
// a veth testbed. It says so on stderr and in the output; the kernel
// comparisons need the real testbed and are left out.
func rpcSimFallback(o rpcOpts) (rpcOutput, error) {
	fmt.Fprintln(os.Stderr, "ndpperf rpc: not root, so no veth testbed (AF_XDP and namespaces need root);")
	fmt.Fprintln(os.Stderr, "  running the same NDP RPCs (new connection per RPC) on the simulator instead: real ndp endpoints")
	fmt.Fprintln(os.Stderr, "  and pull queues, 2 hosts on one NDP switch, 10 Gb/s links with 1 µs delay, virtual time;")
	fmt.Fprintln(os.Stderr, "  kernel TCP/TFO and raw AF_XDP comparisons need root and are skipped.")
	return rpcSimRun(o, 10e9)
}

// rpcSimRun runs o's NDP RPCs (new connection per RPC) on the simulator: two
// hosts on one NDP switch with 8-packet queues, links at rate with 1 µs delay.
func rpcSimRun(o rpcOpts, rate int64) (rpcOutput, error) {
	r, err := sim.RunRPC(sim.RPCConfig{
		Star: simStar(float64(rate), mtuOr1500(o.mtu)),
		Size: o.size, N: o.n,
	})
	if err != nil {
		return rpcOutput{}, err
	}
	rtts := make([]time.Duration, len(r.Latencies))
	for i, l := range r.Latencies {
		rtts[i] = time.Duration(l)
	}
	out := rpcOutput{
		Results: []latencyResult{summarize("ndp", rtts, 0, "simulator (virtual time), new connection per RPC")},
		Size:    o.size, MTU: mtuOr1500(o.mtu), Rounds: 1, Setup: "simulator: not root, no testbed",
	}
	return out, nil
}

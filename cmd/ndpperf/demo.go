package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/internal/sim"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/sockapi"
)

// demo: the README's main job. It builds veth testbeds in network
// namespaces, runs a short RPC comparison (ndpperf rpc with fewer RPCs) and
// a small incast (K servers answer one client at once through a Linux
// bridge, NDP and kernel TCP side by side), prints a table and removes
// everything it created. Not root: the same workloads run on the simulator,
// with a message saying so.

func init() {
	register(&subcommand{
		name:    "demo",
		summary: "build a veth testbed, compare NDP RPC latency and incast with kernel TCP, print a table, clean up",
		run:     runDemo,
	})
}

type incastResult struct {
	Transport string  `json:"transport"`
	Servers   int     `json:"servers"`
	Size      int     `json:"size_bytes"`
	MedianMs  float64 `json:"median_ms"`
	P90Ms     float64 `json:"p90_ms"`
	MaxMs     float64 `json:"max_ms"`
	Rounds    int     `json:"rounds"`
}

func runDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	n := fs.Int("n", 2000, "RPCs per transport in the latency comparison")
	servers := fs.Int("servers", 4, "incast servers")
	size := fs.Int("size", 64<<10, "incast response bytes per server")
	rounds := fs.Int("rounds", 20, "incast rounds")
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
	inc, err := demoIncast(*servers, *size, *rounds)
	if err != nil {
		return fmt.Errorf("incast: %w", err)
	}
	fmt.Fprintln(os.Stderr, "ndpperf demo: testbeds removed.")
	return printDemo(rpc, inc, *asJSON)
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
	fmt.Printf("%-10s %8s %10s %10s %10s %10s\n", "transport", "servers", "bytes", "median_ms", "p90_ms", "max_ms")
	for _, r := range inc {
		fmt.Printf("%-10s %8d %10d %10.3f %10.3f %10.3f\n", r.Transport, r.Servers, r.Size, r.MedianMs, r.P90Ms, r.MaxMs)
	}
	return nil
}

// demoIncast: client namespace and K server namespaces, each joined by a
// veth pair to a bridge in one more namespace, so the K responses converge
// on the client's single link.
func demoIncast(k, size, rounds int) ([]incastResult, error) {
	tb, err := testbed.New()
	if err != nil {
		return nil, err
	}
	defer tb.Close()
	br, err := tb.NewNamespace()
	if err != nil {
		return nil, err
	}
	if err := br.NewBridge("br0"); err != nil { // layer 2 only: no iptables on bridged frames
		return nil, err
	}
	type host struct {
		ns   *testbed.Namespace
		link testbed.Link
	}
	hosts := make([]host, k+1) // 0 = client
	for i := range hosts {
		ns, err := tb.NewNamespace()
		if err != nil {
			return nil, err
		}
		v, err := tb.NewVeth(ns, br, testbed.VethConfig{AddrA: fmt.Sprintf("10.203.0.%d/24", i+1)})
		if err != nil {
			return nil, err
		}
		if _, err := br.Run("link", "set", v.B.Name, "master", "br0"); err != nil {
			return nil, err
		}
		hosts[i] = host{ns, v.A}
	}
	var res []incastResult

	// NDP: embedded stacks, adaptive polling (K+1 stacks share 2 vCPUs).
	stacks := make([]*sockapi.Stack, len(hosts))
	defer func() {
		for _, s := range stacks {
			if s != nil {
				s.Close()
			}
		}
	}()
	for i, h := range hosts {
		err := h.ns.Do(func() (err error) {
			stacks[i], err = sockapi.Open(sockapi.Config{Interface: h.link.Name, LinkRate: 10e9})
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	payload := make([]byte, size)
	for i := 1; i < len(hosts); i++ {
		l, err := stacks[i].Listen(7)
		if err != nil {
			return nil, err
		}
		go func() {
			for {
				m, err := l.RecvMessage(64)
				if err != nil {
					return
				}
				m.Reply(payload) // inline: cheaper than a goroutine wakeup
			}
		}()
	}
	req := []byte(fmt.Sprintf("GET %d", size))
	ndpTimes, err := incastRounds(k, rounds, func(i int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := stacks[0].Call(ctx, fmt.Sprintf("10.203.0.%d:7", i+2), req)
		if err == nil && len(resp) != size {
			err = fmt.Errorf("server %d: %d of %d bytes", i+1, len(resp), size)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ndp: %w", err)
	}
	res = append(res, incastSummary("ndp", k, size, ndpTimes))

	// Kernel TCP: a new connection per request, same servers' namespaces.
	for i := 1; i < len(hosts); i++ {
		var ln net.Listener
		if err := hosts[i].ns.Do(func() (err error) {
			ln, err = net.Listen("tcp4", fmt.Sprintf("10.203.0.%d:9911", i+1))
			return err
		}); err != nil {
			return nil, err
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 64)
					if _, err := c.Read(buf); err == nil {
						c.Write(payload)
					}
				}()
			}
		}()
	}
	tcpTimes, err := incastRounds(k, rounds, func(i int) error {
		var c net.Conn
		if err := hosts[0].ns.Do(func() (err error) {
			c, err = net.DialTimeout("tcp4", fmt.Sprintf("10.203.0.%d:9911", i+2), 10*time.Second)
			return err
		}); err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(req); err != nil {
			return err
		}
		got, err := io.Copy(io.Discard, c)
		if err == nil && int(got) != size {
			err = fmt.Errorf("tcp server %d: %d of %d bytes", i+1, got, size)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tcp: %w", err)
	}
	res = append(res, incastSummary("tcp", k, size, tcpTimes))
	return res, nil
}

// incastRounds runs rounds of k concurrent requests and returns each
// round's completion time (until the last response).
func incastRounds(k, rounds int, request func(i int) error) ([]time.Duration, error) {
	var times []time.Duration
	for r := 0; r < rounds+1; r++ { // round 0 warms up (ARP, connections)
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, k)
		for i := 0; i < k; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = request(i)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		if r > 0 {
			times = append(times, time.Since(t0))
		}
	}
	return times, nil
}

func incastSummary(name string, k, size int, times []time.Duration) incastResult {
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return incastResult{Transport: name, Servers: k, Size: size, Rounds: len(times),
		MedianMs: ms(times[len(times)/2]), P90Ms: ms(times[int(0.9*float64(len(times)-1))]), MaxMs: ms(times[len(times)-1])}
}

// demoSim is the unprivileged fallback: the same RPC and incast workloads on
// the simulator.
func demoSim(n, servers, size int, asJSON bool) error {
	fmt.Fprintln(os.Stderr, "ndpperf demo: not root, so no veth testbed (network namespaces and AF_XDP need root).")
	fmt.Fprintln(os.Stderr, "  Running the same workloads on the simulator instead: real ndp endpoints and pull queues,")
	fmt.Fprintln(os.Stderr, "  hosts on one NDP switch (10 Gb/s links, 1 µs delay), virtual time. Kernel TCP needs root; skipped.")
	star := sim.StarConfig{LinkRate: 10e9, LinkDelay: 1000, Endpoint: ndp.Config{IW: 30}, Fabric: fabric.Config{DataQueue: 8}, Seed: 1}
	r, err := sim.RunRPC(sim.RPCConfig{Star: star, Size: 1024, N: n})
	if err != nil {
		return err
	}
	rtts := make([]time.Duration, len(r.Latencies))
	for i, l := range r.Latencies {
		rtts[i] = time.Duration(l)
	}
	rpc := rpcOutput{Results: []latencyResult{summarize("ndp", rtts, 0, "simulator, new connection per RPC")}, Size: 1024, Rounds: 1,
		Setup: "simulator: not root, no testbed"}
	ir, err := sim.RunIncast(sim.IncastConfig{Star: star, Senders: servers, Size: int64(size)})
	if err != nil {
		return err
	}
	inc := []incastResult{{Transport: "ndp (sim)", Servers: servers, Size: size, Rounds: 1,
		MedianMs: ir.MedianFCTus / 1000, P90Ms: ir.LastFCTus / 1000, MaxMs: ir.LastFCTus / 1000}}
	return printDemo(rpc, inc, asJSON)
}

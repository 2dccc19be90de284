package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/sockapi"
)

// hull: HULL's trade-off on real packets (papers/hull-nsdi12.txt): RPC latency
// while a bulk transfer shares the receiver's link, with the NDP receivers'
// pull rate at gamma x the link rate for each --gamma. Three hosts on
// ndpswitch at --link: host 0 is the RPC client and the bulk receiver, host 1
// answers RPCs (--size bytes each way, a new connection per RPC), host 2 sends
// the bulk transfer without pause. Every switch port runs the HULL phantom
// queue (drain rate --phantom-gamma x link, marking ECN CE past its
// threshold); NDP does not react to the marks, which count how often the
// link ran without headroom. The bulk rate is the receiver's bytes over the
// RPC window. The gammas take turns (--rounds), each turn with fresh stacks,
// so load on the shared machine hits them alike. A turn in which the
// switch's thread ran late enough to lose link time (the process not
// scheduled for more than its catch-up) holds every queued frame that long;
// the RPCs of the turns without such a stall are summarized apart, since
// their tail is the fabric's and not the machine's.

func init() {
	register(&subcommand{
		name:    "hull",
		summary: "HULL on ndpswitch: RPC p50/p99 beside a bulk transfer into the same host, NDP pull rate at gamma x link for each gamma, phantom queue marks (root)",
		run:     runHULL,
	})
}

type hullOpts struct {
	link    int64
	gammas  []float64
	phantom float64
	pqBytes int     // phantom queue marking threshold
	rpcRate float64 // RPCs started per second (open loop); 0: one after another
	size    int
	n       int
	rounds  int
	rto     time.Duration
	hostQ   int
	json    bool
}

func parseHULLFlags(args []string) (hullOpts, error) {
	fs := flag.NewFlagSet("hull", flag.ContinueOnError)
	link := bitRate(100e6)
	fs.Var(&link, "link", "emulated rate of every switch port, bits/s")
	gammas := fs.String("gamma", "1,0.95", "comma-separated NDP pull-rate factors to compare (HULL's gamma), each in (0, 1]")
	phantom := fs.Float64("phantom-gamma", 0.95, "phantom queue drain rate as a fraction of --link (0: no phantom queue)")
	pqBytes := fs.Int("phantom-threshold", 1000, "phantom queue depth in bytes above which departing frames are marked")
	rpcRate := fs.Float64("rpc-rate", 0, "RPCs started per second on a fixed schedule (open loop: the RPCs' bytes per second are the same at every gamma; each RPC's time counts from its scheduled start); 0: one RPC after another (closed loop)")
	size := fs.Int("size", 1024, "RPC request and response bytes")
	n := fs.Int("n", 2000, "measured RPCs per gamma")
	rounds := fs.Int("rounds", 4, "turns per gamma the RPCs are split into")
	rto := fs.Duration("rto", 0, "NDP retransmission timeout (0: as ndpperf leafspine picks for --link)")
	hostQ := fs.Int("host-queue", 256, "emulate each host's link into the switch at --link with a NIC queue of this many frames (0: frames enter the switch as fast as the veth delivers them)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return hullOpts{}, err
	}
	if fs.NArg() > 0 {
		return hullOpts{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := hullOpts{link: int64(link), phantom: *phantom, pqBytes: *pqBytes, rpcRate: *rpcRate, size: *size, n: *n, rounds: *rounds, rto: *rto, hostQ: *hostQ, json: *asJSON}
	for _, g := range strings.Split(*gammas, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(g), 64)
		if err != nil || v <= 0 || v > 1 {
			return o, fmt.Errorf("--gamma %q: want values in (0, 1]", g)
		}
		o.gammas = append(o.gammas, v)
	}
	switch {
	case o.link < 1e6 || o.link > 100e9:
		return o, fmt.Errorf("--link %d: want 1M..100G", o.link)
	case o.phantom < 0 || o.phantom > 1:
		return o, fmt.Errorf("--phantom-gamma %v: want 0..1", o.phantom)
	case o.pqBytes < 1 || o.pqBytes > 1<<20:
		return o, fmt.Errorf("--phantom-threshold %d: want 1..1MiB", o.pqBytes)
	case !(o.rpcRate >= 0 && o.rpcRate <= 1e6):
		return o, fmt.Errorf("--rpc-rate %v: want 0..1e6", o.rpcRate)
	case o.size < 1 || o.size > 64<<10:
		return o, fmt.Errorf("--size %d: want 1..64KiB", o.size)
	case o.hostQ < 0 || o.hostQ > 100000:
		return o, fmt.Errorf("--host-queue %d: want 0..100000", o.hostQ)
	case o.rounds < 1 || o.n < o.rounds:
		return o, fmt.Errorf("--n %d, --rounds %d: want at least one RPC per round", o.n, o.rounds)
	}
	if o.rto == 0 {
		o.rto = switchRTO(o.link)
	}
	return o, nil
}

type hullResult struct {
	Gamma float64       `json:"gamma"`
	RPC   latencyResult `json:"rpc"`
	// BulkMbps is the median over the turns of the bulk receiver's rate
	// during the RPCs; BulkFraction is it over the link rate.
	BulkMbps     float64 `json:"bulk_mbps"`
	BulkFraction float64 `json:"bulk_fraction_of_link"`
	// RPCMbps is the median over the turns of the RPC responses' payload
	// into host 0 during the RPCs: the bytes that share the link with the
	// bulk (closed loop: more when RPCs are faster).
	RPCMbps float64 `json:"rpc_response_mbps"`
	// The switch over the RPC windows: phantom queue marks and NDP trims at
	// host 0's port, and the most NDP data frames queued there at once.
	PhantomMarks uint64 `json:"phantom_marks"`
	Trimmed      uint64 `json:"trimmed"`
	MaxDataDepth int    `json:"max_data_frames"`
	// NDPArrivals are the NDP frames offered to host 0's port over the RPC
	// windows; MeanDataAhead the mean data frames each found queued there;
	// MarkedFraction the phantom queue's marks over the port's departures.
	NDPArrivals    uint64  `json:"ndp_arrivals"`
	MeanDataAhead  float64 `json:"mean_data_frames_ahead"`
	MarkedFraction float64 `json:"phantom_marked_fraction"`
	// The stacks' counters over the RPC windows: host 0 (bulk receiver and
	// RPC client) and host 2 (bulk sender).
	Receiver ndpCounters `json:"receiver"`
	Sender   ndpCounters `json:"bulk_sender"`
	// Server is host 1's (the RPC server's) counters over the same windows.
	Server ndpCounters `json:"rpc_server"`
	// SwitchLostMs is the link time the switch's ports lost over the RPC
	// windows because its thread ran more than its catch-up late (the
	// process was not scheduled): everything queued waited that long.
	// StallFreeTurns counts the turns in which it lost none, and
	// RPCStallFree is the RPCs of those turns alone.
	SwitchLostMs   float64        `json:"switch_lost_ms"`
	StallFreeTurns int            `json:"stall_free_turns"`
	RPCStallFree   *latencyResult `json:"rpc_stall_free,omitempty"`
}

type hullOutput struct {
	LinkBps      int64        `json:"link_bps"`
	PhantomGamma float64      `json:"phantom_gamma"`
	Size         int          `json:"size_bytes"`
	Results      []hullResult `json:"results"`
	// Last over first --gamma: RPC p99 and bulk rate, and the p99 over the
	// turns in which the switch lost no link time.
	P99Ratio          float64 `json:"p99_ratio,omitempty"`
	BulkRatio         float64 `json:"bulk_ratio,omitempty"`
	P99RatioStallFree float64 `json:"p99_ratio_stall_free,omitempty"`
	CPUs              int     `json:"cpus"`
	Setup             string  `json:"setup"`
}

func runHULL(args []string) error {
	o, err := parseHULLFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, AF_XDP)")
	}
	fmt.Fprintln(os.Stderr, "ndpperf hull: building a three-host ndpswitch testbed...")
	out, err := hullTestbed(o)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(out)
	}
	fmt.Printf("HULL on ndpswitch: %s\n", out.Setup)
	fmt.Printf("%-6s %9s %9s %9s %10s %9s %9s %13s %8s %9s %10s\n", "gamma", "rpc_p50us", "rpc_p90us", "rpc_p99us", "bulk_Mb/s", "fraction", "rpc_Mb/s", "phantom_marks", "trimmed", "max_data", "mean_ahead")
	for _, r := range out.Results {
		fmt.Printf("%-6.3g %9.0f %9.0f %9.0f %10.1f %9.3f %9.2f %13d %8d %9d %10.2f\n", r.Gamma, r.RPC.P50us, r.RPC.P90us, r.RPC.P99us, r.BulkMbps, r.BulkFraction, r.RPCMbps, r.PhantomMarks, r.Trimmed, r.MaxDataDepth, r.MeanDataAhead)
	}
	for _, r := range out.Results {
		r.Receiver.print(os.Stdout, fmt.Sprintf("gamma %.3g receiver", r.Gamma))
		r.Sender.print(os.Stdout, fmt.Sprintf("gamma %.3g bulk sender", r.Gamma))
		r.Server.print(os.Stdout, fmt.Sprintf("gamma %.3g rpc server", r.Gamma))
	}
	for _, r := range out.Results {
		fmt.Printf("gamma %.3g: the switch lost %.1f ms of link time to late passes; %d of %d turns lost none", r.Gamma, r.SwitchLostMs, r.StallFreeTurns, o.rounds)
		if l := r.RPCStallFree; l != nil {
			fmt.Printf(", their %d RPCs: p50 %.0f us, p99 %.0f us", l.N, l.P50us, l.P99us)
		}
		fmt.Println()
	}
	if out.P99Ratio > 0 {
		fmt.Printf("last / first gamma: rpc p99 %.2f, bulk %.3f", out.P99Ratio, out.BulkRatio)
		if out.P99RatioStallFree > 0 {
			fmt.Printf(", rpc p99 over turns without switch stalls %.2f", out.P99RatioStallFree)
		}
		fmt.Println()
	}
	return nil
}

func hullTestbed(o hullOpts) (hullOutput, error) {
	out := hullOutput{LinkBps: o.link, PhantomGamma: o.phantom, Size: o.size, CPUs: runtime.NumCPU()}
	load := "one after another"
	if o.rpcRate > 0 {
		load = fmt.Sprintf("started at %g per second, timed from the scheduled start", o.rpcRate)
	}
	out.Setup = fmt.Sprintf("3 hosts on ndpswitch at %s b/s (Ethernet wire bytes, 8-packet NDP queues, phantom queue at %.2f x link marking above %d bytes, as HULL's PQ); host 2 sends host 0 a bulk transfer while host 0 calls host 1 (%d-byte request and response, new connection per RPC, %s, %d RPCs per gamma in %d turns); NDP embedded stacks, pull rate gamma x link, RTO %v; host NIC queues %d frames (0: none)",
		formatRate(float64(o.link)), o.phantom, o.pqBytes, o.size, load, o.n, o.rounds, o.rto, o.hostQ)
	tb, err := newTestbed()
	if err != nil {
		return out, err
	}
	defer tb.Close()
	star, err := softswitch.NewStar(tb, softswitch.StarConfig{Hosts: 3, Switch: softswitch.Config{Rate: o.link, HostQueue: o.hostQ, FrameOverhead: ndp.WireOverhead,
		Fabric: fabric.Config{PhantomRate: o.phantom * float64(o.link), PhantomThreshold: o.pqBytes}}})
	if err != nil {
		return out, err
	}
	rtts := make([][]time.Duration, len(o.gammas))
	calm := make([][]time.Duration, len(o.gammas)) // turns without switch stalls
	bulk := make([][]float64, len(o.gammas))
	rpcRate := make([][]float64, len(o.gammas))
	res := make([]hullResult, len(o.gammas))
	ahead, departures := make([]uint64, len(o.gammas)), make([]uint64, len(o.gammas))
	for r := 0; r < o.rounds; r++ {
		for gi, g := range o.gammas {
			n := o.n / o.rounds
			if r == o.rounds-1 {
				n = o.n - n*(o.rounds-1)
			}
			t, err := hullTurn(star, o, g, n)
			if err != nil {
				return out, fmt.Errorf("gamma %v turn %d: %w", g, r+1, err)
			}
			rtts[gi] = append(rtts[gi], t.rtts...)
			var lost uint64
			for _, p := range t.sw.Ports {
				lost += p.LostNs
			}
			res[gi].SwitchLostMs += float64(lost) / 1e6
			if lost == 0 {
				res[gi].StallFreeTurns++
				calm[gi] = append(calm[gi], t.rtts...)
			}
			bulk[gi] = append(bulk[gi], t.bulkMbps)
			rpcRate[gi] = append(rpcRate[gi], t.rpcMbps)
			p := t.sw.Ports[0]
			res[gi].PhantomMarks += p.NDP.PhantomMarks
			res[gi].Trimmed += p.NDP.Trimmed
			res[gi].MaxDataDepth = max(res[gi].MaxDataDepth, p.NDP.MaxDataDepth)
			res[gi].NDPArrivals += p.NDP.Arrivals
			ahead[gi] += p.NDPDataAhead
			departures[gi] += p.NDP.Departures
			res[gi].Receiver = res[gi].Receiver.add(t.receiver)
			res[gi].Sender = res[gi].Sender.add(t.sender)
			res[gi].Server = res[gi].Server.add(t.server)
		}
	}
	for gi, g := range o.gammas {
		sort.Float64s(bulk[gi])
		sort.Float64s(rpcRate[gi])
		res[gi].RPCMbps = rpcRate[gi][len(rpcRate[gi])/2]
		res[gi].Gamma = g
		res[gi].RPC = summarize("ndp", rtts[gi], 0, "")
		if len(calm[gi]) > 0 {
			l := summarize("ndp", calm[gi], 0, "")
			res[gi].RPCStallFree = &l
		}
		res[gi].BulkMbps = bulk[gi][len(bulk[gi])/2]
		res[gi].BulkFraction = res[gi].BulkMbps * 1e6 / float64(o.link)
		if res[gi].NDPArrivals > 0 {
			res[gi].MeanDataAhead = float64(ahead[gi]) / float64(res[gi].NDPArrivals)
		}
		if departures[gi] > 0 {
			res[gi].MarkedFraction = float64(res[gi].PhantomMarks) / float64(departures[gi])
		}
	}
	out.Results = res
	if first, last := res[0], res[len(res)-1]; len(res) > 1 && first.RPC.P99us > 0 && first.BulkMbps > 0 {
		out.P99Ratio = last.RPC.P99us / first.RPC.P99us
		out.BulkRatio = last.BulkMbps / first.BulkMbps
		if first.RPCStallFree != nil && last.RPCStallFree != nil && first.RPCStallFree.P99us > 0 {
			out.P99RatioStallFree = last.RPCStallFree.P99us / first.RPCStallFree.P99us
		}
	}
	return out, nil
}

// hullTurnResult is one turn of one gamma: the RPCs' round trips, the bulk
// rate over them, and the switch's and the stacks' counters over them.
type hullTurnResult struct {
	rtts             []time.Duration
	bulkMbps         float64
	rpcMbps          float64
	sw               softswitch.Stats
	receiver, sender ndpCounters
	server           ndpCounters
}

// hullTurn opens the three stacks with pull rate gamma x link, starts the bulk
// transfer, runs n RPCs once it flows, and returns what hullTurnResult holds.
// Port 0's MaxDataDepth is its high-water mark since the switch started.
func hullTurn(star *softswitch.Star, o hullOpts, gamma float64, n int) (hullTurnResult, error) {
	var zero hullTurnResult
	stacks := make([]*sockapi.Stack, 3)
	defer func() {
		for _, s := range stacks {
			if s != nil {
				s.Close()
			}
		}
	}()
	for i, h := range star.Hosts {
		s, err := openStack(h.NS, h.Link.Name, sockapi.Config{LinkRate: o.link, Gamma: gamma, RTO: o.rto, IW: switchIW})
		if err != nil {
			return zero, err
		}
		stacks[i] = s
	}
	deadline := time.Now().Add(time.Minute)
	rpcL, err := stacks[1].Listen(rpcNDPPort)
	if err != nil {
		return zero, err
	}
	defer rpcL.Close()
	resp := make([]byte, o.size)
	go func() {
		for {
			m, err := rpcL.RecvMessage(o.size)
			if err != nil {
				if errors.Is(err, sockapi.ErrStackClosed) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "closed") {
					return
				}
				continue
			}
			m.Reply(resp)
		}
	}()
	bulkL, err := stacks[0].Listen(9)
	if err != nil {
		return zero, err
	}
	defer bulkL.Close()
	bulkL.SetDeadline(deadline)
	var got atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { // bulk receiver
		defer wg.Done()
		c, err := bulkL.AcceptNDP()
		if err != nil {
			errs[0] = err
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		buf := make([]byte, 256<<10)
		for {
			m, err := c.Read(buf)
			got.Add(int64(m))
			if err == io.EOF {
				return
			}
			if err != nil {
				errs[0] = err
				return
			}
		}
	}()
	go func() { // bulk sender: writes until stopped
		defer wg.Done()
		c, err := stacks[2].Dial(context.Background(), star.Hosts[0].Link.Addr.Addr().String()+":9", sockapi.WithDialTimeout(5*time.Second))
		if err != nil {
			errs[1] = err
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		chunk := make([]byte, 64<<10)
		for !stop.Load() {
			if _, err := c.Write(chunk); err != nil {
				errs[1] = err
				return
			}
		}
		if err := c.CloseWrite(); err != nil {
			errs[1] = err
			return
		}
		io.Copy(io.Discard, c)
	}()
	// Let the transfer reach its pull-clocked steady state.
	warm := time.Now().Add(10 * time.Second)
	for got.Load() < 2<<20 && time.Now().Before(warm) && errs[0] == nil && errs[1] == nil {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	before := star.Switch.Stats()
	recv0, send0, srv0 := stackCounters(stacks[0]), stackCounters(stacks[2]), stackCounters(stacks[1])
	b0, t0 := got.Load(), time.Now()
	rpcAddr := sockapi.Addr{IP: star.Hosts[1].Link.Addr.Addr(), Port: rpcNDPPort}
	rtts, rpcErr := hullRPCs(stacks[0], rpcAddr, o, n)
	b1, t1 := got.Load(), time.Now()
	res := hullTurnResult{rtts: rtts, bulkMbps: float64(b1-b0) * 8 / t1.Sub(t0).Seconds() / 1e6,
		rpcMbps:  float64(len(rtts)*o.size) * 8 / t1.Sub(t0).Seconds() / 1e6,
		receiver: stackCounters(stacks[0]).sub(recv0), sender: stackCounters(stacks[2]).sub(send0), server: stackCounters(stacks[1]).sub(srv0)}
	time.Sleep(5 * time.Millisecond) // the switch publishes within a millisecond
	res.sw = star.Switch.Stats().Sub(before)
	stop.Store(true)
	wg.Wait()
	if err := errors.Join(rpcErr, errs[0], errs[1]); err != nil {
		return zero, err
	}
	return res, nil
}

// hullMaxInFlight bounds the open-loop RPCs outstanding at once; a start
// that finds them all busy waits, and its RPC's time still counts from its
// scheduled start.
const hullMaxInFlight = 64

// hullRPCs runs n RPCs from s to addr: one after another, or (--rpc-rate)
// started on a fixed schedule, each timed from its scheduled start.
func hullRPCs(s *sockapi.Stack, addr sockapi.Addr, o hullOpts, n int) ([]time.Duration, error) {
	call := func(i int, req, buf []byte) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := s.CallInto(ctx, addr, req, buf)
		if err == nil && m != o.size {
			err = fmt.Errorf("RPC %d: %d-byte response, want %d", i, m, o.size)
		}
		return err
	}
	rtts := make([]time.Duration, 0, n)
	if o.rpcRate == 0 {
		req, buf := make([]byte, o.size), make([]byte, o.size)
		for i := 0; i < n; i++ {
			start := time.Now()
			if err := call(i, req, buf); err != nil {
				return rtts, err
			}
			rtts = append(rtts, time.Since(start))
		}
		return rtts, nil
	}
	type bufs struct{ req, buf []byte }
	free := make(chan bufs, hullMaxInFlight)
	for range hullMaxInFlight {
		free <- bufs{make([]byte, o.size), make([]byte, o.size)}
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / o.rpcRate)
	begin := time.Now()
	for i := 0; i < n; i++ {
		at := begin.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		b := <-free
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := call(i, b.req, b.buf)
			d := time.Since(at)
			free <- b
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			rtts = append(rtts, d)
		}()
	}
	wg.Wait()
	return rtts, errors.Join(errs...)
}

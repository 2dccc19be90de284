package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"sync"
	"time"

	"github.com/ndpstack/ndpstack/internal/chart"
	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/internal/sim"
	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/sockapi"
)

// incast: K servers answer one client at once (the demo's incast as its own
// command). A client namespace and K server namespaces are each joined by a
// veth pair to a Linux bridge in one more namespace, so the K responses
// converge on the client's single link. Every round the client asks every
// server at once for --size bytes on a new connection each and times the
// round until the last response is complete: NDP first (embedded stacks,
// adaptive polling, sockapi Call / RecvMessage / Reply), then kernel TCP
// (a new connection per request) over the same namespaces and veths. The
// NDP client's counters over the measured rounds, and the servers' summed,
// say why a round took what it took (retransmissions, RTOs, NACKs, trimmed
// headers, late pull slots, frames per transmit syscall).
//
// Not root: the same incast runs on the simulator (real endpoints and pull
// queues, virtual time) and says so.

func init() {
	register(&subcommand{
		name:    "incast",
		summary: "K-to-1 incast through a bridge: NDP (new connection per request) vs kernel TCP, with NDP counters (root; simulator otherwise)",
		run:     runIncast,
	})
}

type incastOpts struct {
	servers int
	size    int
	rounds  int
	mtu     int    // every veth's MTU; 0 = kernel default (1500)
	rate    int64  // NDP pull pacer rate, bits/s
	pcap    string // directory for one pcapng capture per NDP stack ("": none)
	json    bool
	plot    string       // PNG of every round's completion per transport ("": none)
	prof    profileFlags // over the NDP rounds
	// spin is the NDP stacks' sockapi.Config.Spin when spinFixed (--spin
	// with a duration or never); otherwise stackSpin picks it (auto).
	spin      time.Duration
	spinFixed bool
	// fabricFlags: a Linux bridge (fabric "") or ndpswitch.
	fabricFlags
}

func parseIncastFlags(args []string) (incastOpts, error) {
	fs := flag.NewFlagSet("incast", flag.ContinueOnError)
	servers := fs.Int("servers", 4, "servers answering at once (1..16)")
	size := byteSize(64 << 10)
	fs.Var(&size, "size", "response bytes per server (e.g. 65536, 64KiB, 1MB; at most 64MiB)")
	rounds := fs.Int("rounds", 20, "measured rounds per transport (one unmeasured round first)")
	mtu := fs.Int("mtu", 0, "MTU of every veth, 1280..9000 (0: 1500); NDP uses 4 KB UMEM frames above 1778 and multi-buffer chains of them above 3826")
	rate := bitRate(10e9)
	fs.Var(&rate, "rate", "NDP pull pacer rate of every stack (bits/s, e.g. 10G)")
	pcap := fs.String("pcap", "", "write each NDP stack's frames to DIR/incast-client.pcapng, DIR/incast-serverN.pcapng (64 MiB each at most)")
	asJSON := fs.Bool("json", false, "print JSON")
	fab := registerFabricFlags(fs, "bridge", "a Linux bridge, no queue to speak of")
	plotFile := fs.String("plot", "", "also draw every round's completion time per transport to this PNG file")
	spin := fs.String("spin", "auto", spinUsage)
	var prof profileFlags
	prof.register(fs)
	if err := fs.Parse(args); err != nil {
		return incastOpts{}, err
	}
	if fs.NArg() > 0 {
		return incastOpts{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := incastOpts{servers: *servers, size: int(size), rounds: *rounds, mtu: *mtu, rate: int64(rate), pcap: *pcap, json: *asJSON, plot: *plotFile, prof: prof}
	var err error
	if o.spin, o.spinFixed, err = parseSpin(*spin); err != nil {
		return incastOpts{}, err
	}
	if o.fabricFlags, err = fab.parse(fs, &o.rate); err != nil {
		return incastOpts{}, err
	}
	return o, o.validate()
}

func (o incastOpts) validate() error {
	switch {
	case o.servers < 1 || o.servers > 16:
		return fmt.Errorf("--servers %d: want 1..16", o.servers)
	case o.size < 1 || o.size > 64<<20:
		return fmt.Errorf("--size %d: want 1 byte..64MiB", o.size)
	case o.rounds < 1 || o.rounds > 100000:
		return fmt.Errorf("--rounds %d: want 1..100000", o.rounds)
	case o.mtu != 0 && (o.mtu < 1280 || o.mtu > 9000):
		return fmt.Errorf("--mtu %d: want 1280..9000", o.mtu)
	case o.rate < 1e6:
		return fmt.Errorf("--rate %d: want at least 1M", o.rate)
	}
	if err := o.fabricFlags.validate(); err != nil {
		return err
	}
	if o.plot != "" {
		if err := chart.CheckName(o.plot); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	return nil
}

// incastResult is one transport's round completion times.
type incastResult struct {
	Transport string  `json:"transport"`
	Servers   int     `json:"servers"`
	Size      int     `json:"size_bytes"`
	MedianMs  float64 `json:"median_ms"`
	P90Ms     float64 `json:"p90_ms"`
	MaxMs     float64 `json:"max_ms"`
	Rounds    int     `json:"rounds"`
	// Client is the NDP client stack's counters over the measured rounds,
	// Servers the server stacks' summed (NDP only).
	Client        *ndpCounters `json:"client_counters,omitempty"`
	ServerSummed  *ndpCounters `json:"servers_counters,omitempty"`
	GoodputMbps   float64      `json:"median_goodput_mbps"` // servers x size x 8 / median round
	ReceivedBytes int64        `json:"received_bytes"`      // response bytes checked over the measured rounds
	// Switch is what the switch did over the measured rounds (--fabric switch).
	Switch *switchCounters `json:"switch,omitempty"`
	// TCP is the kernel's TCP counters summed over every namespace over the
	// measured rounds (kernel TCP only).
	TCP *tcpCounters `json:"tcp_counters,omitempty"`
	// CPUMsPerRound is the CPU time of this process (every thread: stacks,
	// switch, and the kernel's work inside their system calls, such as a
	// veth transmit that runs the peer's XDP program) per measured round
	// (testbed only). Over the CPUs it bounds how short a round the machine
	// allows.
	CPUMsPerRound float64 `json:"process_cpu_ms_per_round,omitempty"`

	roundsMs []float64 // each measured round's completion in ms, in round order, for --plot
}

type incastOutput struct {
	Results []incastResult `json:"results"`
	// OptimalMs is the round's optimum: every response byte at the NDP
	// pull rate (servers x size x 8 / RateBps) plus one round trip
	// (RTTMs). NDPOverOptimal is NDP's median round over it.
	OptimalMs      float64 `json:"optimal_ms,omitempty"`
	RTTMs          float64 `json:"rtt_ms,omitempty"`
	NDPOverOptimal float64 `json:"ndp_median_over_optimal,omitempty"`
	// NDPOverPullRate is NDP's median goodput (servers x size x 8 over
	// the median round) over the pull rate; NDPOverTCP is NDP's median
	// goodput over kernel TCP's (above 1: NDP's rounds are shorter).
	NDPOverPullRate float64 `json:"ndp_over_pull_rate,omitempty"`
	NDPOverTCP      float64 `json:"ndp_over_tcp,omitempty"`
	// Sim is the same incast in ndpsim's simulator (--fabric switch: the
	// switch's link rate, the paper's 8-packet queue, IW 30, one round);
	// SimOverSwitch is its completion over the switch run's NDP median.
	Sim           *incastResult `json:"sim,omitempty"`
	SimOverSwitch float64       `json:"sim_over_switch,omitempty"`
	// BytesVerified: every response of every measured round had the
	// expected length and content (a round with a wrong byte fails the run).
	BytesVerified bool `json:"bytes_verified"`
	// Fabric is "bridge" or "switch"; LinkBps the switch's port rate.
	Fabric  string `json:"fabric"`
	LinkBps int64  `json:"link_bps,omitempty"`
	// OptimalCounts says what OptimalMs counts: response payload bytes
	// (bridge), or whole frames, NDP's headers included, at the switch's
	// link rate (switch: the bytes its emulated link carries, as ndpsim's
	// optimum counts them). PayloadOptimalMs is the payload-only optimum.
	OptimalCounts    string  `json:"optimal_counts,omitempty"`
	PayloadOptimalMs float64 `json:"payload_optimal_ms,omitempty"`
	MTU              int     `json:"mtu"`
	RateBps          int64   `json:"ndp_pull_rate_bps"`
	// NDPSpin is how long the NDP stacks' waiters spin before they sleep
	// (--spin): "never", "default" (the stack's adaptive default) or a
	// duration.
	NDPSpin string `json:"ndp_spin,omitempty"`
	CPUs    int    `json:"cpus"`
	Setup   string `json:"setup"`
}

func runIncast(args []string) error {
	o, err := parseIncastFlags(args)
	if err != nil {
		return err
	}
	var out incastOutput
	if os.Geteuid() != 0 {
		out, err = incastSim(o)
	} else {
		fmt.Fprintf(os.Stderr, "ndpperf incast: building a %d-to-1 testbed (%d namespaces, %s)...\n", o.servers, o.servers+2, map[bool]string{false: "a bridge", true: "ndpswitch"}[o.fabric == "switch"])
		out, err = incastTestbed(o)
		if err == nil {
			fmt.Fprintln(os.Stderr, "ndpperf incast: testbed removed.")
		}
	}
	if err != nil {
		return err
	}
	if o.plot != "" {
		if err := plotIncast(o.plot, out); err != nil {
			return err
		}
	}
	return printIncast(out, o.json)
}

func printIncast(out incastOutput, asJSON bool) error {
	if asJSON {
		return printJSON(out)
	}
	fmt.Printf("Incast (%s): one client asks every server at once; time until the last response is complete\n", out.Setup)
	printIncastTable(out.Results)
	if out.OptimalMs > 0 {
		fmt.Printf("optimum %.3f ms (every byte at the pull rate + one round trip of %.3f ms); ndp median / optimum %.2f; ndp goodput / pull rate %.2f",
			out.OptimalMs, out.RTTMs, out.NDPOverOptimal, out.NDPOverPullRate)
		if out.NDPOverTCP > 0 {
			fmt.Printf("; ndp / tcp goodput %.2f", out.NDPOverTCP)
		}
		fmt.Println()
	}
	if out.Sim != nil {
		fmt.Printf("simulator, same incast (%s b/s links, 8-packet queues, IW 30, one round): %.3f ms; simulator / switch ndp median %.2f\n",
			formatRate(float64(out.LinkBps)), out.Sim.MedianMs, out.SimOverSwitch)
	}
	for _, r := range out.Results {
		if r.Client != nil {
			fmt.Printf("%s counters over the %d measured rounds:\n", r.Transport, r.Rounds)
			if r.ServerSummed == nil { // simulator: one set summed over every host
				r.Client.print(os.Stdout, "all hosts")
				continue
			}
			r.Client.print(os.Stdout, "client ")
			r.ServerSummed.print(os.Stdout, "servers")
		}
		if r.Switch != nil {
			fmt.Printf("%s ", r.Transport)
			r.Switch.print(os.Stdout)
		}
		if r.CPUMsPerRound > 0 {
			fmt.Printf("%s: this process used %.1f CPU ms per round (spinning included; %d CPUs)\n", r.Transport, r.CPUMsPerRound, out.CPUs)
		}
		if r.TCP != nil {
			fmt.Printf("%s kernel counters: retransmitted segments %d, timeouts %d, fast retransmits %d\n", r.Transport, r.TCP.RetransSegs, r.TCP.Timeouts, r.TCP.FastRetrans)
		}
	}
	return nil
}

func printIncastTable(res []incastResult) {
	fmt.Printf("%-10s %8s %10s %10s %10s %10s %12s\n", "transport", "servers", "bytes", "median_ms", "p90_ms", "max_ms", "goodput_Mbps")
	for _, r := range res {
		fmt.Printf("%-10s %8d %10d %10.3f %10.3f %10.3f %12.0f\n", r.Transport, r.Servers, r.Size, r.MedianMs, r.P90Ms, r.MaxMs, r.GoodputMbps)
	}
}

// incastTestbed builds the bridge testbed, runs NDP then kernel TCP, and
// removes everything.
func incastTestbed(o incastOpts) (incastOutput, error) {
	if err := o.validate(); err != nil {
		return incastOutput{}, err
	}
	k, size := o.servers, o.size
	out := incastOutput{MTU: mtuOr1500(o.mtu), RateBps: o.rate, CPUs: runtime.NumCPU()}
	out.Fabric = "bridge"
	out.Setup = fmt.Sprintf("%d server namespaces and a client namespace on a Linux bridge, veth MTU %d, new connection per request", k, out.MTU)
	tb, err := newTestbed()
	if err != nil {
		return out, err
	}
	defer tb.Close()
	hosts, sw, err := o.hosts(tb, o.servers+1, o.mtu, "10.203.0")
	if err != nil {
		return out, err
	}
	if sw != nil {
		out.Fabric, out.LinkBps = "switch", o.link
		c := sw.Config()
		out.Setup = fmt.Sprintf("%d server namespaces and a client namespace on ndpswitch (%s trimming, %s b/s ports, NDP data queue %d packets, drop-tail queue %d frames for TCP, loop tick %v), veth MTU %d, new connection per request",
			k, c.Personality, formatRate(float64(o.link)), max(c.Fabric.DataQueue, 8), c.OtherQueue, c.Tick, out.MTU)
	}
	out.Setup += fmt.Sprintf("; NDP IW %d packets", o.iwPackets(out.MTU))
	switchSnap := func() softswitch.Stats {
		if sw == nil {
			return softswitch.Stats{}
		}
		return sw.Stats()
	}
	var swBefore softswitch.Stats
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i*131 + i>>9)
	}
	req := []byte(fmt.Sprintf("GET %d", size))
	rttReq := []byte("GET 1")

	// NDP: embedded stacks, adaptive polling (K+1 stacks share the CPUs).
	spin := o.stackSpin(len(hosts), runtime.NumCPU())
	out.NDPSpin = spinName(spin)
	out.Setup += fmt.Sprintf("; NDP waiters spin: %s", out.NDPSpin)
	stacks := make([]*sockapi.Stack, len(hosts))
	defer func() {
		for _, s := range stacks {
			if s != nil {
				s.Close()
			}
		}
	}()
	for i, h := range hosts {
		cfg := sockapi.Config{LinkRate: o.rate, CommodityTrim: o.commodityTrim(), Spin: spin, IW: o.iw(), PullBatch: o.pullBatch}
		if i > 0 && size > incastDefaultSendBuffer {
			// A server's send buffer holds its whole response, so its
			// Reply returns at once instead of waking for every ACK that
			// frees room (a 1 MB response in the default 256 KiB buffer
			// woke its writer about 600 times a round). Kernel TCP's send
			// buffer grows to the same end (tcp_wmem, up to 4 MB).
			cfg.SendBuffer = size
		}
		if o.pcap != "" {
			name := "incast-client.pcapng"
			if i > 0 {
				name = fmt.Sprintf("incast-server%d.pcapng", i)
			}
			cfg.CaptureFile = filepath.Join(o.pcap, name)
		}
		var err error
		// --cpuprofile: each stack's goroutines (its background poller)
		// carry its role, so a profile splits the CPU by role.
		pprof.Do(context.Background(), pprof.Labels("stack", stackRole(i)), func(context.Context) {
			stacks[i], err = openStack(h.ns, h.link.Name, cfg)
		})
		if err != nil {
			return out, err
		}
	}
	ndpDone := make(chan struct{}) // closed before the NDP stacks are
	defer func() {
		select {
		case <-ndpDone:
		default:
			close(ndpDone)
		}
	}()
	for i := 1; i < len(hosts); i++ {
		l, err := stacks[i].Listen(7)
		if err != nil {
			return out, err
		}
		go pprof.Do(context.Background(), pprof.Labels("stack", stackRole(i)), func(context.Context) {
			for {
				m, err := l.RecvMessage(64)
				if err != nil {
					select {
					case <-ndpDone:
						return
					default:
					}
					if errors.Is(err, net.ErrClosed) || errors.Is(err, sockapi.ErrStackClosed) {
						return
					}
					continue // one bad request (a reset) does not stop the server
				}
				m.Reply(payload[:incastAsked(m.Data, len(payload))]) // inline: cheaper than a goroutine wakeup
			}
		})
	}
	var before []ndpCounters
	snapshot := func() []ndpCounters {
		c := make([]ndpCounters, len(stacks))
		for i, s := range stacks {
			c[i] = stackCounters(s)
		}
		return c
	}
	resp := make([][]byte, k) // one response buffer per server: no allocation per request
	for i := range resp {
		resp[i] = make([]byte, size)
	}
	// The round trip of the optimum: median of small NDP calls (1-byte
	// request and answer, new connection each) to every server in turn.
	rtts := make([]time.Duration, 0, 20*k)
	for j := 0; j < 20*k; j++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t0 := time.Now()
		_, err := stacks[0].CallInto(ctx, sockapi.Addr{IP: hosts[1+j%k].link.Addr.Addr(), Port: 7}, rttReq, resp[0])
		d := time.Since(t0)
		cancel()
		if err != nil {
			return out, fmt.Errorf("ndp round trip: %w", err)
		}
		if j >= k { // the first call to each server resolves its MAC
			rtts = append(rtts, d)
		}
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	rtt := rtts[len(rtts)/2]
	var stopProf func() error
	var profErr error
	var cpuBefore time.Duration
	var ndpTimes []time.Duration
	pprof.Do(context.Background(), pprof.Labels("stack", stackRole(0)), func(context.Context) {
		ndpTimes, err = incastRounds(k, o.rounds, func(i int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			addr := sockapi.Addr{IP: hosts[i+1].link.Addr.Addr(), Port: 7}
			n, err := stacks[0].CallInto(ctx, addr, req, resp[i])
			if err == nil && (n != size || !bytes.Equal(resp[i], payload)) {
				err = fmt.Errorf("server %d: %d of %d bytes, or bytes that differ from those sent", i+1, n, size)
			}
			return err
		}, func() {
			before = snapshot()
			swBefore = switchSnap()
			cpuBefore = processCPU().total()
			stopProf, profErr = o.prof.start()
		})
	})
	if err == nil {
		err = profErr
	}
	if stopProf != nil {
		if perr := stopProf(); err == nil {
			err = perr
		}
	}
	if err != nil {
		return out, fmt.Errorf("ndp: %w", err)
	}
	after := snapshot()
	r := incastSummary("ndp", k, size, ndpTimes)
	r.CPUMsPerRound = float64((processCPU().total() - cpuBefore).Microseconds()) / 1000 / float64(len(ndpTimes))
	if sw != nil {
		r.Switch = newSwitchCounters(switchSnap().Sub(swBefore), 0)
	}
	client := after[0].sub(before[0])
	var servers ndpCounters
	for i := 1; i < len(after); i++ {
		servers = servers.add(after[i].sub(before[i]))
	}
	r.Client, r.ServerSummed = &client, &servers
	out.Results = append(out.Results, r)
	close(ndpDone)
	for i, s := range stacks {
		s.Close()
		stacks[i] = nil
	}

	// Kernel TCP: a new connection per request, same namespaces and veths.
	var tcpBefore tcpCounters
	tcpSnap := func() tcpCounters {
		var sum tcpCounters
		for _, h := range hosts {
			c, err := readTCPCounters(h.ns)
			if err == nil {
				sum = sum.add(c)
			}
		}
		return sum
	}
	for i := 1; i < len(hosts); i++ {
		var ln net.Listener
		if err := hosts[i].ns.Do(func() (err error) {
			ln, err = net.Listen("tcp4", fmt.Sprintf("%s:9911", hosts[i].link.Addr.Addr()))
			return err
		}); err != nil {
			return out, err
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
	tcpTimes, err := incastRounds(k, o.rounds, func(i int) error {
		var c net.Conn
		if err := hosts[0].ns.Do(func() (err error) {
			c, err = net.DialTimeout("tcp4", fmt.Sprintf("%s:9911", hosts[i+1].link.Addr.Addr()), 10*time.Second)
			return err
		}); err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(req); err != nil {
			return err
		}
		n, err := io.ReadFull(c, resp[i])
		if err == nil {
			var one [1]byte
			if m, _ := c.Read(one[:]); m > 0 {
				err = fmt.Errorf("tcp server %d: more than %d bytes", i+1, size)
			} else if !bytes.Equal(resp[i], payload) {
				err = fmt.Errorf("tcp server %d: bytes differ from those sent", i+1)
			}
		}
		if err != nil {
			err = fmt.Errorf("tcp server %d: %d of %d bytes: %w", i+1, n, size, err)
		}
		return err
	}, func() {
		swBefore = switchSnap()
		tcpBefore = tcpSnap()
		cpuBefore = processCPU().total()
	})
	if err != nil {
		return out, fmt.Errorf("tcp: %w", err)
	}
	r = incastSummary("tcp", k, size, tcpTimes)
	r.CPUMsPerRound = float64((processCPU().total() - cpuBefore).Microseconds()) / 1000 / float64(len(tcpTimes))
	if sw != nil {
		r.Switch = newSwitchCounters(switchSnap().Sub(swBefore), 0)
	}
	tc := tcpSnap().sub(tcpBefore)
	r.TCP = &tc
	out.Results = append(out.Results, r)
	out.BytesVerified = true
	out.setOptimum(o, rtt)
	if sw != nil {
		// The same incast in the simulator: the same link rate, queues and
		// IW, one round in virtual time, beside the switch's.
		so := o
		so.rate = o.link
		sim, err := incastSimRun(so)
		if err != nil {
			return out, fmt.Errorf("simulator: %w", err)
		}
		out.Sim = &sim.Results[0]
		out.SimOverSwitch = out.Sim.MedianMs / out.Results[0].MedianMs
	}
	return out, nil
}

// setOptimum fills the optimum and the ratios from Results (NDP first,
// kernel TCP second when measured) and the measured round trip.
func (out *incastOutput) setOptimum(o incastOpts, rtt time.Duration) {
	bytes := float64(o.servers) * float64(o.size)
	opt := time.Duration(bytes*8/float64(o.rate)*1e9) + rtt
	out.RTTMs = float64(rtt.Microseconds()) / 1000
	out.OptimalMs = float64(opt.Microseconds()) / 1000
	out.OptimalCounts = "response payload bytes at the NDP pull rate, plus rtt_ms"
	if o.fabric == "switch" {
		out.PayloadOptimalMs = out.OptimalMs
		frames := float64(o.servers) * float64(incastFrameBytes(o.size, out.MTU))
		opt = time.Duration(frames*8/float64(o.link)*1e9) + rtt
		out.OptimalMs = float64(opt.Microseconds()) / 1000
		out.OptimalCounts = "every response frame (NDP headers included) at the switch's link rate, plus rtt_ms"
	}
	if len(out.Results) == 0 || out.OptimalMs <= 0 {
		return
	}
	ndp := out.Results[0]
	out.NDPOverOptimal = ndp.MedianMs / out.OptimalMs
	out.NDPOverPullRate = ndp.GoodputMbps * 1e6 / float64(o.rate)
	if len(out.Results) > 1 && out.Results[1].GoodputMbps > 0 {
		out.NDPOverTCP = ndp.GoodputMbps / out.Results[1].GoodputMbps
	}
}

// stackSpin is the NDP stacks' Spin for stacks stacks on ncpu CPUs
// (pickSpin).
func (o incastOpts) stackSpin(stacks, ncpu int) time.Duration {
	return pickSpin(o.spin, o.spinFixed, stacks, ncpu)
}

// incastDefaultSendBuffer is the stacks' default send buffer
// (ndp.Config.SendBuffer's zero value).
const incastDefaultSendBuffer = 256 << 10

// incastAsked is the response size a request asks for ("GET n"), at most
// max; max if the request does not parse.
func incastAsked(req []byte, max int) int {
	digits, ok := bytes.CutPrefix(req, []byte("GET "))
	if !ok || len(digits) == 0 {
		return max
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' || n > max {
			return max
		}
		n = n*10 + int(c-'0')
	}
	return min(n, max)
}

// stackRole names the incast's stack i (0: the client) in CPU profiles.
func stackRole(i int) string {
	if i == 0 {
		return "client"
	}
	return fmt.Sprintf("server%d", i)
}

// incastRounds runs rounds of k concurrent requests and returns each
// measured round's completion time (until the last response). One
// unmeasured round comes first (ARP, first connections); afterWarmup, when
// set, runs between it and the measured rounds.
func incastRounds(k, rounds int, request func(i int) error, afterWarmup func()) ([]time.Duration, error) {
	var times []time.Duration
	for r := 0; r < rounds+1; r++ {
		if r == 1 && afterWarmup != nil {
			afterWarmup()
		}
		t0 := time.Now()
		trace.Log(context.Background(), "incast", "round start") // --trace: where each round begins and ends
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
		trace.Log(context.Background(), "incast", "round end")
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("round %d: %w", r, err)
		}
		if r > 0 {
			times = append(times, time.Since(t0))
		}
	}
	return times, nil
}

func incastSummary(name string, k, size int, times []time.Duration) incastResult {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	byRound := make([]float64, len(times))
	for i, d := range times {
		byRound[i] = ms(d)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	med := times[len(times)/2]
	return incastResult{Transport: name, Servers: k, Size: size, Rounds: len(times),
		MedianMs: ms(med), P90Ms: ms(times[int(0.9*float64(len(times)-1))]), MaxMs: ms(times[len(times)-1]),
		GoodputMbps:   float64(k*size) * 8 / med.Seconds() / 1e6,
		ReceivedBytes: int64(k) * int64(size) * int64(len(times)), roundsMs: byRound}
}

// simStar is the simulator's stand-in for a testbed: hosts on one NDP
// switch, links at rate with 1 µs delay, the paper's 8-packet data queue.
func simStar(rate float64, mtu int) sim.StarConfig {
	return sim.StarConfig{LinkRate: rate, LinkDelay: 1000, Endpoint: ndp.Config{IW: 30, MTU: mtu},
		Fabric: fabric.Config{DataQueue: 8}, Seed: 1}
}

// incastSim is the unprivileged fallback: the same incast on the simulator.
func incastSim(o incastOpts) (incastOutput, error) {
	fmt.Fprintln(os.Stderr, "ndpperf incast: not root, so no veth testbed (network namespaces and AF_XDP need root).")
	fmt.Fprintf(os.Stderr, "  Running the same incast on the simulator instead: real ndp endpoints and pull queues, %d senders\n", o.servers)
	fmt.Fprintf(os.Stderr, "  and one receiver on one NDP switch (%s b/s links, 1 µs delay), virtual time, one round. Kernel TCP needs root; skipped.\n", formatRate(float64(o.rate)))
	return incastSimRun(o)
}

// incastSimRun runs the incast on the simulator.
func incastSimRun(o incastOpts) (incastOutput, error) {
	if err := o.validate(); err != nil {
		return incastOutput{}, err
	}
	mtu := mtuOr1500(o.mtu)
	r, err := sim.RunIncast(sim.IncastConfig{Star: simStar(float64(o.rate), mtu), Senders: o.servers, Size: int64(o.size)})
	if err != nil {
		return incastOutput{}, err
	}
	if !r.BytesVerified {
		return incastOutput{}, fmt.Errorf("simulated incast: bytes not verified (%d of %d flows completed, %d failed: %s)", r.Completed, r.Flows, r.Failed, r.FirstError)
	}
	c := ndpCounters{Retransmits: r.Retransmits, RTOFires: r.RTOs, NacksIn: r.Nacks, TrimmedIn: r.Trimmed}
	out := incastOutput{MTU: mtu, RateBps: o.rate, CPUs: runtime.NumCPU(),
		Setup:     fmt.Sprintf("simulator: not root, no testbed; optimum %.3f ms; counters summed over every host", r.OptimalUs/1000),
		OptimalMs: r.OptimalUs / 1000, NDPOverOptimal: r.LastFCTus / r.OptimalUs,
		NDPOverPullRate: float64(o.servers*o.size) * 8 / (r.LastFCTus / 1e6) / float64(o.rate),
		Results: []incastResult{{Transport: "ndp (sim)", Servers: o.servers, Size: o.size, Rounds: 1,
			MedianMs: r.LastFCTus / 1000, P90Ms: r.LastFCTus / 1000, MaxMs: r.LastFCTus / 1000,
			GoodputMbps: float64(o.servers*o.size) * 8 / (r.LastFCTus / 1e6) / 1e6, ReceivedBytes: int64(o.servers) * int64(o.size),
			Client: &c, roundsMs: []float64{r.LastFCTus / 1000}}}} // summed over every host (printIncast says so)
	return out, nil
}

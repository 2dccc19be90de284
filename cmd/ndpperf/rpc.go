package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/chart"
	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
	"golang.org/x/sys/unix"
)

// rpc: request/response latency of NDP next to kernel TCP (persistent
// connection, new connection per RPC, TCP Fast Open) and the raw AF_XDP
// ping-pong floor, in one run over one two-namespace veth testbed. NDP runs
// either a new connection per RPC (--conn new: CallInto, both ends
// busy-polling on pinned threads by default) or long-lived connections
// (--conn persistent: one net.Conn per client, Write then Read, stacks with
// the default Config, adaptive polling by default; --clients N concurrent
// connections, each client and each server connection on its own
// goroutine, against as many kernel TCP connections; --compare xdp is then
// the raw AF_XDP floor for as many concurrent exchanges, xdpfloor.go). Each
// transport gets its own veth pair; the measurement is split into rounds
// and the transports take turns (pingpong.go's measurePingpong), so load on
// the shared machine hits them alike. Every result carries the CPU time per
// exchange of its transport's turns (the process's, and ndpd's in daemon
// mode), and the output the process's CPU while no transport takes a turn.
//
// Not root: the same RPC workload runs on the simulator (internal/sim)
// instead, and says so.

func init() {
	register(&subcommand{
		name:    "rpc",
		summary: "RPC latency: NDP (new connection per RPC) vs raw AF_XDP, kernel TCP, TCP new-conn, TFO (root; simulator otherwise)",
		run:     runRPC,
	})
}

// runDaemonRPC is set by the daemon side (rpc_daemon*.go) to run the ndp
// transport through ndpd (sockapi.Attach) instead of embedded stacks.
var runDaemonRPC func(pair *testbed.Pair, o rpcOpts) (ppEnd, error)

type rpcOpts struct {
	size    int
	n       int
	warmup  int
	rounds  int
	compare []string
	mode    string
	cores   string // daemon mode: "dedicated" or "shared"
	conn    string // "new" (a connection per RPC) or "persistent"
	clients int    // concurrent client connections (persistent)
	mtu     int    // every veth pair's MTU (0: 1500)
	poll    string
	spin    time.Duration
	pcap    string // directory for the NDP stacks' pcapng captures ("": none)
	json    bool
	plot    string
	scrape  time.Duration // ndp-scraped: how often its stacks' metrics are gathered
	prof    profileFlags  // over the measurement (every transport's turns: profile with --compare "" for ndp alone)
	rate    int64         // ndp stacks' pull rate (0: the stack's default; --fabric switch: --link)
	fabricFlags
}

const (
	rpcNDPPort = 7
	rpcTCPPort = 9910
)

func parseRPCFlags(name string, args []string, defN int) (rpcOpts, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	size := fs.Int("size", 1024, "request and response bytes")
	n := fs.Int("n", defN, "measured RPCs per transport")
	warmup := fs.Int("warmup", 1000, "unmeasured RPCs per transport first")
	rounds := fs.Int("rounds", 10, "turns per transport the measurement is split into")
	compare := fs.String("compare", "xdp,tcp,tcp-newconn,tfo", "comma-separated comparisons: xdp (raw AF_XDP ping-pong; with --conn persistent, the raw AF_XDP floor for --clients concurrent exchanges), tcp (persistent kernel TCP), tcp-newconn, tfo (TCP Fast Open), ndp-scraped (ndp with its metrics gathered every --scrape-every), embedded (--mode daemon: the same RPCs over embedded stacks); empty for ndp only")
	mode := fs.String("mode", "embedded", "ndp stack: embedded (in this process) or daemon (through ndpd)")
	cores := fs.String("cores", defaultCores(), "--mode daemon: dedicated (each ndpd core loop and each application thread on its own CPU, all busy polling; needs 4 CPUs) or shared (each ndpd core loop on its application's CPU, adaptive polling); default by CPU count")
	conn := fs.String("conn", "new", "ndp connections: new (one per RPC, CallInto) or persistent (one long-lived net.Conn per client, Write then Read)")
	clients := fs.Int("clients", 1, "persistent: concurrent client connections, each on its own goroutine (kernel TCP gets as many)")
	mtu := fs.Int("mtu", 0, "MTU of every transport's veth pair, 1280..9000 (0: 1500), or of the switch's links, at most 3506 (native XDP on veth); NDP packets use all of it (above 3826 as AF_XDP multi-buffer chains of 4 KB frames), kernel TCP crosses the same MTU")
	poll := fs.String("poll", "", "ndp waiting: busy (spin until done) or adaptive (spin, then sleep on the AF_XDP socket); default busy with --conn new, adaptive (the stack's default) with --conn persistent")
	spin := fs.Duration("spin", 0, "adaptive mode: how long a waiter spins before sleeping (0: the stack's default, Config.Spin)")
	pcap := fs.String("pcap", "", "embedded mode: write the NDP client's and server's frames to DIR/rpc-client.pcapng and DIR/rpc-server.pcapng (64 MiB each at most)")
	asJSON := fs.Bool("json", false, "print JSON")
	plotFile := fs.String("plot", "", "also draw every transport's latency CDF to this PNG file")
	scrape := fs.Duration("scrape-every", 10*time.Millisecond, "ndp-scraped comparison: gather and encode both stacks' Prometheus metrics this often during its turns")
	var prof profileFlags
	fab := registerFabricFlags(fs, "veth", "one veth pair per transport")
	prof.register(fs)
	if err := fs.Parse(args); err != nil {
		return rpcOpts{}, err
	}
	o := rpcOpts{prof: prof, size: *size, n: *n, warmup: *warmup, rounds: *rounds, mode: *mode, cores: *cores, conn: *conn, clients: *clients, mtu: *mtu,
		poll: *poll, spin: *spin, pcap: *pcap, json: *asJSON, plot: *plotFile, scrape: *scrape}
	var err error
	if o.fabricFlags, err = fab.parse(fs, &o.rate); err != nil {
		return o, err
	}
	compareSet := false
	fs.Visit(func(f *flag.Flag) { compareSet = compareSet || f.Name == "compare" })
	if o.on() {
		// One switch, one link per host: every transport crosses it, so
		// only those without an XDP program of their own on the link.
		if o.mode != "embedded" {
			return o, errors.New("--fabric switch runs embedded stacks only")
		}
		if !compareSet {
			*compare = "tcp,tcp-newconn,tfo"
		}
	}
	if o.pcap != "" && o.mode != "embedded" {
		return o, errors.New("--pcap: embedded mode only (a daemon captures with ndpd --pcap)")
	}
	switch o.conn {
	case "new":
		if o.clients != 1 {
			return o, errors.New("--clients needs --conn persistent")
		}
		if o.poll == "" {
			o.poll = "busy"
		}
	case "persistent":
		if o.clients < 1 || o.clients > 64 {
			return o, fmt.Errorf("--clients %d: want 1..64", o.clients)
		}
		if o.mode != "embedded" {
			return o, errors.New("--conn persistent runs embedded stacks only")
		}
		if o.poll == "" {
			o.poll = "adaptive"
		}
		if !compareSet {
			*compare = "tcp"
		}
	default:
		return o, fmt.Errorf("--conn %q: want new or persistent", o.conn)
	}
	if o.poll != "busy" && o.poll != "adaptive" {
		return o, fmt.Errorf("--poll %q: want busy or adaptive", o.poll)
	}
	if o.plot != "" {
		if err := chart.CheckName(o.plot); err != nil {
			return o, fmt.Errorf("--plot: %w", err)
		}
	}
	if *compare != "" {
		o.compare = strings.Split(*compare, ",")
	}
	for _, c := range o.compare {
		switch c {
		case "xdp", "tcp", "tcp-newconn", "tfo":
		case "embedded":
			if o.mode != "daemon" {
				return o, errors.New("the embedded comparison runs with --mode daemon")
			}
		case "ndp-scraped":
			if o.conn != "new" || o.mode != "embedded" {
				return o, errors.New("the ndp-scraped comparison runs with --conn new --mode embedded")
			}
			if o.scrape <= 0 {
				return o, errors.New("--scrape-every must be positive")
			}
		default:
			return o, fmt.Errorf("unknown comparison %q", c)
		}
		if o.on() && c != "tcp" && c != "tcp-newconn" && c != "tfo" {
			return o, fmt.Errorf("--fabric switch compares with tcp, tcp-newconn and tfo (each host has one link, where %q needs one of its own)", c)
		}
		if o.conn == "persistent" && c != "tcp" && c != "xdp" {
			return o, fmt.Errorf("--conn persistent compares with tcp and xdp, not %q", c)
		}
	}
	if o.mtu != 0 && (o.mtu < 1280 || o.mtu > 9000) {
		return o, fmt.Errorf("--mtu %d: want 1280..9000", o.mtu)
	}
	if o.size < 8 || o.size > 1<<20 {
		return o, fmt.Errorf("--size %d: want 8..1MiB", o.size)
	}
	if o.mode != "embedded" && o.mode != "daemon" {
		return o, fmt.Errorf("--mode %q: want embedded or daemon", o.mode)
	}
	switch o.cores {
	case "shared":
	case "dedicated":
		if runtime.NumCPU() < 4 {
			return o, fmt.Errorf("--cores dedicated: needs 4 CPUs (two ndpd core loops, two application threads), this machine has %d", runtime.NumCPU())
		}
	default:
		return o, fmt.Errorf("--cores %q: want dedicated or shared", o.cores)
	}
	if o.n < 1 || o.rounds < 1 || o.rounds > o.n {
		return o, errors.New("--n and --rounds must be positive, rounds <= n")
	}
	return o, nil
}

func runRPC(args []string) error {
	o, err := parseRPCFlags("rpc", args, 20000)
	if err != nil {
		return err
	}
	var out rpcOutput
	if os.Geteuid() != 0 {
		out, err = rpcSimFallback(o)
	} else {
		out, err = rpcTestbed(o)
	}
	if err != nil {
		return err
	}
	if o.plot != "" {
		if err := plotLatency(o.plot, fmt.Sprintf("ndpperf rpc: %d-byte RPCs", o.size), out.Results); err != nil {
			return err
		}
	}
	return printRPC(out, o.json)
}

type rpcOutput struct {
	Results []latencyResult    `json:"results"`
	Ratios  map[string]float64 `json:"ratios,omitempty"`
	Size    int                `json:"size"`
	Conn    string             `json:"conn"`
	Clients int                `json:"clients"`
	MTU     int                `json:"mtu"`
	Poll    string             `json:"poll"`
	Rounds  int                `json:"rounds"`
	CPUs    int                `json:"cpus"`
	Setup   string             `json:"setup"`
	// The embedded ndp stacks' counters over the whole run (warmup
	// included): on a quiet veth pair nothing is lost, so RTO fires,
	// spurious RTOs, duplicates in and paths excluded should all be 0.
	NDPClient *ndpCounters `json:"ndp_client_counters,omitempty"`
	NDPServer *ndpCounters `json:"ndp_server_counters,omitempty"`
	// GCCycles is how many garbage collections ran during the measurement
	// (this process: every transport's clients and servers).
	GCCycles uint32 `json:"gc_cycles"`
	// IdleCPUPct is this process's CPU time, in % of one CPU, over
	// idleWindow after the measurement with every transport open and none
	// taking its turn: what the ndp stacks' background pollers and the Go
	// runtime spend idle, which every transport's cpu_us_per_exchange
	// includes for the time of its turns.
	IdleCPUPct float64 `json:"idle_cpu_pct"`
	// XDPFloor: the raw AF_XDP floor's frames and kicks (--conn
	// persistent --compare xdp).
	XDPFloor *xdpFloorCounters `json:"xdp_floor_counters,omitempty"`
	// --fabric switch: "switch", the port rate, the switch's counters over
	// the run (warmup included, every transport) and the same NDP RPCs in
	// ndpsim at the same link rate.
	Fabric  string          `json:"fabric"`
	LinkBps int64           `json:"link_bps,omitempty"`
	Switch  *switchCounters `json:"switch,omitempty"`
	Sim     *latencyResult  `json:"sim,omitempty"`
}

// rpcStacks is implemented by the ndp transports with embedded stacks.
type rpcStacks interface {
	stacks() (client, server *sockapi.Stack)
}

// rpcTestbed builds the testbed, runs every transport, removes the testbed.
func rpcTestbed(o rpcOpts) (rpcOutput, error) {
	var out rpcOutput
	tb, err := newTestbed()
	if err != nil {
		return out, err
	}
	defer tb.Close()
	// On the switch, one pair of hosts carries every transport.
	var swPair *testbed.Pair
	var sw *softswitch.Switch
	var nsA, nsB *testbed.Namespace
	if o.on() {
		if swPair, sw, err = o.pair(tb, o.mtu); err != nil {
			return out, err
		}
		nsA, nsB = swPair.A, swPair.B
	} else {
		if nsA, err = tb.NewNamespace(); err != nil {
			return out, err
		}
		if nsB, err = tb.NewNamespace(); err != nil {
			return out, err
		}
	}
	for _, ns := range []*testbed.Namespace{nsA, nsB} {
		// TFO for client and server; reuse of TIME_WAIT ports for tcp-newconn.
		if out, err := ns.Command("sysctl", "-q", "-w", "net.ipv4.tcp_fastopen=3", "net.ipv4.tcp_tw_reuse=1", "net.ipv4.ip_local_port_range=10000 65000").CombinedOutput(); err != nil {
			return rpcOutput{}, fmt.Errorf("sysctl in %s: %v: %s", ns.Name, err, out)
		}
	}
	var ends []ppEnd
	defer func() {
		for _, e := range ends {
			e.close()
		}
	}()
	transports := append([]string{"ndp"}, o.compare...)
	for i, tr := range transports {
		pair := swPair
		if pair == nil {
			v, err := tb.NewVeth(nsA, nsB, testbed.VethConfig{
				AddrA: fmt.Sprintf("10.202.%d.1/24", i), AddrB: fmt.Sprintf("10.202.%d.2/24", i), MTU: o.mtu})
			if err != nil {
				return out, err
			}
			pair = &testbed.Pair{A: nsA, B: nsB, Veth: v}
		}
		var e ppEnd
		switch tr {
		case "ndp":
			if o.mode == "daemon" {
				if runDaemonRPC == nil {
					return out, errors.New("daemon mode not built")
				}
				e, err = runDaemonRPC(pair, o)
			} else if o.conn == "persistent" {
				e, err = newNDPConnRPC(pair, o)
			} else {
				e, err = newNDPRPC(pair, o)
			}
		case "ndp-scraped":
			e, err = newScrapedRPC(pair, o)
		case "embedded":
			var ne *ndpRPC
			if ne, err = newNDPRPC(pair, o); err == nil {
				e = embeddedRPC{ne}
			}
		case "xdp":
			if o.size > 1472 {
				return out, fmt.Errorf("xdp comparison: --size %d exceeds one frame (1472)", o.size)
			}
			if o.conn == "persistent" {
				e, err = newXDPFloor(pair, o.size, o.clients)
			} else {
				e, err = newXDPPingpong(pair, pingpongOpts{size: o.size})
			}
		case "tcp":
			e, err = newTCPRPC(pair, o, tcpPersistent)
		case "tcp-newconn":
			e, err = newTCPRPC(pair, o, tcpNewConn)
		case "tfo":
			e, err = newTCPRPC(pair, o, tcpFastOpen)
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", tr, err)
		}
		ends = append(ends, e)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gc0 := ms.NumGC
	stopProf, err := o.prof.start()
	if err != nil {
		return out, err
	}
	swBefore := switchStats(sw)
	res, err := measurePingpong(ends, pingpongOpts{size: o.size, n: o.n, warmup: o.warmup, rounds: o.rounds, timeout: time.Second})
	if perr := stopProf(); err == nil {
		err = perr
	}
	if err != nil {
		return out, err
	}
	runtime.ReadMemStats(&ms)
	idle := idleCPUPct()
	setup := "two network namespaces joined by veth (one pair per transport), client and server threads pinned to different CPUs"
	if o.clients > 1 {
		setup = "two network namespaces joined by veth (one pair per transport), a goroutine per client and per server connection"
	}
	setup += fmt.Sprintf(", MTU %d", mtuOr1500(o.mtu))
	out = rpcOutput{Results: res, Ratios: map[string]float64{}, Size: o.size, Conn: o.conn, Clients: o.clients, MTU: mtuOr1500(o.mtu), Poll: o.poll,
		Rounds: o.rounds, CPUs: runtime.NumCPU(), Setup: setup, GCCycles: ms.NumGC - gc0, IdleCPUPct: idle, Fabric: "veth"}
	if sw != nil {
		out.Switch = newSwitchCounters(sw.Stats().Sub(swBefore), 0)
		out.Fabric, out.LinkBps = "switch", o.link
		out.Setup = strings.Replace(setup, "joined by veth (one pair per transport)", "on "+o.setup(sw)+", every transport through it", 1)
		sim, err := rpcSimRun(o, o.link)
		if err != nil {
			return out, fmt.Errorf("ndpsim: %w", err)
		}
		out.Sim = &sim.Results[0]
	}
	if st, ok := ends[0].(rpcStacks); ok {
		cs, ss := st.stacks()
		c, s := stackCounters(cs), stackCounters(ss)
		out.NDPClient, out.NDPServer = &c, &s
	}
	for _, e := range ends {
		if f, ok := e.(*xdpFloor); ok {
			out.XDPFloor = f.counters()
		}
	}
	rpcRatios(&out)
	return out, nil
}

// idleWindow is how long idleCPUPct measures, after idleSettle.
const idleWindow, idleSettle = 250 * time.Millisecond, 50 * time.Millisecond

// idleCPUPct is the process's CPU time over idleWindow, in % of one CPU,
// idleSettle after the caller's last turn ended.
func idleCPUPct() float64 {
	time.Sleep(idleSettle)
	c0, t0 := processCPU(), time.Now()
	time.Sleep(idleWindow)
	c, wall := processCPU().sub(c0).total(), time.Since(t0)
	return round2(100 * float64(c) / float64(wall))
}

// defaultCores is --cores' default: dedicated where there are CPUs for it.
func defaultCores() string {
	if runtime.NumCPU() >= 4 {
		return "dedicated"
	}
	return "shared"
}

// embeddedRPC is the embedded ndp RPC as the comparison to --mode daemon.
type embeddedRPC struct{ *ndpRPC }

func (embeddedRPC) name() string { return "embedded" }

func rpcRatios(out *rpcOutput) {
	by := map[string]latencyResult{}
	for _, r := range out.Results {
		by[r.Transport] = r
	}
	n, ok := by["ndp"]
	if !ok {
		return
	}
	for _, other := range []string{"xdp", "tcp", "tcp-newconn", "tfo", "ndp-scraped", "embedded"} {
		if x, ok := by[other]; ok && x.P50us > 0 && x.P99us > 0 && x.P999us > 0 {
			out.Ratios["ndp_p50_over_"+other+"_p50"] = round2(n.P50us / x.P50us)
			out.Ratios["ndp_p99_over_"+other+"_p99"] = round2(n.P99us / x.P99us)
			out.Ratios["ndp_p999_over_"+other+"_p999"] = round2(n.P999us / x.P999us)
		}
	}
}

func printRPC(out rpcOutput, asJSON bool) error {
	if asJSON {
		return printJSON(out)
	}
	fmt.Printf("%-12s %9s %9s %9s %9s %7s %22s %5s %9s  %s\n", "transport", "p50_us", "p90_us", "p99_us", "p999_us", "lost", "cpu_us/exch (usr+sys)", "cpus", "in_flight", "mode")
	for _, r := range out.Results {
		cpu := fmt.Sprintf("%.1f (%.1f+%.1f)", r.CPUUsPerExchange, r.CPUUserUsPerExchange, r.CPUSysUsPerExchange)
		fmt.Printf("%-12s %9.2f %9.2f %9.2f %9.2f %7d %22s %5.2f %9.2f  %s\n", r.Transport, r.P50us, r.P90us, r.P99us, r.P999us, r.Lost, cpu, r.TurnCPUs, r.InFlight, r.Mode)
	}
	for k, v := range out.Ratios {
		fmt.Printf("%s = %.2f\n", k, v)
	}
	if out.NDPClient != nil {
		out.NDPClient.print(os.Stdout, "ndp client")
		out.NDPServer.print(os.Stdout, "ndp server")
	}
	if out.XDPFloor != nil {
		out.XDPFloor.print(os.Stdout)
	}
	if out.Switch != nil {
		out.Switch.print(os.Stdout)
	}
	if out.Sim != nil {
		fmt.Printf("ndpsim, the same NDP RPCs at %s b/s: p50 %.2f us, p99 %.2f us\n", formatRate(float64(out.LinkBps)), out.Sim.P50us, out.Sim.P99us)
	}
	fmt.Printf("GC cycles during the measurement: %d\n", out.GCCycles)
	fmt.Printf("process CPU with no turn running: %.1f%% of a CPU (in every transport's cpu_us/exch for its turns' time)\n", out.IdleCPUPct)
	return nil
}

// ndpRPC: one embedded stack per namespace, PollBusy, no background poller:
// the client thread and the echo thread (pinned by measurePingpong) each
// drive their own stack. Every RPC is a new NDP connection: the request and
// its FIN go out in the first RTT, the server answers and closes.
type ndpRPC struct {
	client, server *sockapi.Stack
	l              *sockapi.Listener
	addr           sockapi.Addr
	req, resp      []byte
	ebuf           []byte
	poll           string
}

func newNDPRPC(pair *testbed.Pair, o rpcOpts) (*ndpRPC, error) {
	v := pair.Veth
	r := &ndpRPC{addr: sockapi.Addr{IP: v.B.Addr.Addr(), Port: rpcNDPPort},
		req: make([]byte, o.size), resp: make([]byte, o.size), ebuf: make([]byte, o.size), poll: o.poll}
	open := func(ns *testbed.Namespace, ifname string, ip netip.Addr, capture string) (*sockapi.Stack, error) {
		cfg := sockapi.Config{Address: ip, PollMode: sockapi.PollBusy, NoBackgroundPoller: true, LinkRate: o.rate, RTO: o.rto(), CommodityTrim: o.commodityTrim(), IW: o.iw(), PullBatch: o.pullBatch}
		if o.pcap != "" {
			cfg.CaptureFile = filepath.Join(o.pcap, capture)
		}
		if o.poll == "adaptive" {
			cfg.PollMode, cfg.Spin = sockapi.PollAdaptive, o.spin // 0: the default
		}
		return openStack(ns, ifname, cfg)
	}
	var err error
	if r.client, err = open(pair.A, v.A.Name, v.A.Addr.Addr(), "rpc-client.pcapng"); err != nil {
		return nil, err
	}
	if r.server, err = open(pair.B, v.B.Name, v.B.Addr.Addr(), "rpc-server.pcapng"); err != nil {
		r.client.Close()
		return nil, err
	}
	if r.l, err = r.server.Listen(rpcNDPPort); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ndpRPC) name() string                            { return "ndp" }
func (r *ndpRPC) stacks() (client, server *sockapi.Stack) { return r.client, r.server }
func (r *ndpRPC) mode() string {
	if r.poll == "adaptive" {
		return "embedded sockapi, new connection per RPC, PollAdaptive (spin, then sleep on the XSK fd), pinned client and server threads"
	}
	return "embedded sockapi, new connection per RPC, PollBusy, pinned client and server threads"
}

func (r *ndpRPC) echo(stop *atomic.Bool) error {
	r.l.SetDeadline(time.Time{})
	defer whenStopped(stop, func() { r.l.SetDeadline(time.Unix(1, 0)) })() // unblock Accept when the turn ends
	for !stop.Load() {
		c, err := r.l.AcceptNDP()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return err
		}
		if _, err := io.ReadFull(c, r.ebuf); err != nil {
			c.Close()
			return fmt.Errorf("server read: %w", err)
		}
		if _, err := c.WriteAndClose(r.ebuf); err != nil {
			c.Close()
			return fmt.Errorf("server write: %w", err)
		}
		c.CloseAndReuse() // nothing keeps c: the stack reuses it for a later Accept
	}
	return nil
}

// whenStopped calls f once stop is set (checked every millisecond), so an
// echo blocked in Accept or Read returns when its turn ends. The returned
// function ends the watch.
func whenStopped(stop *atomic.Bool, f func()) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if stop.Load() {
					f()
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

func (r *ndpRPC) roundTrip(time.Duration) (time.Duration, error) {
	t0 := time.Now()
	n, err := r.client.CallInto(context.Background(), r.addr, r.req, r.resp)
	if err != nil {
		return 0, err
	}
	if n != len(r.resp) {
		return 0, fmt.Errorf("short response: %d of %d bytes", n, len(r.resp))
	}
	return time.Since(t0), nil
}

// settle polls both stacks until neither has work left (at most 64
// rounds): the ACK of the turn's last response leaves the client and
// reaches the server (ppSettle).
func (r *ndpRPC) settle() {
	for range 64 {
		c, s := r.client.Poll(), r.server.Poll()
		if !c && !s {
			return
		}
	}
}

func (r *ndpRPC) close() {
	if r.l != nil {
		r.l.Close()
	}
	r.client.Close()
	r.server.Close()
}

// ndpConnRPC: long-lived NDP connections (--conn persistent), one embedded
// stack per namespace with the default Config (background poller on) and
// the chosen PollMode. Each client writes its request on its own net.Conn
// and reads the whole response; each accepted server connection reads a
// request and writes it back: what a Go service with keep-alive
// connections does.
type ndpConnRPC struct {
	client, server *sockapi.Stack
	cc, sc         []*sockapi.Conn // client and server ends, one pair per client
	req, resp      [][]byte        // per client
	ebuf           [][]byte        // per server connection
	poll           string
}

func newNDPConnRPC(pair *testbed.Pair, o rpcOpts) (*ndpConnRPC, error) {
	v := pair.Veth
	k := max(o.clients, 1)
	r := &ndpConnRPC{poll: o.poll, req: rpcBuffers(k, o.size), resp: rpcBuffers(k, o.size), ebuf: rpcBuffers(k, o.size)}
	open := func(ns *testbed.Namespace, ifname string, ip netip.Addr, capture string) (*sockapi.Stack, error) {
		cfg := sockapi.Config{Address: ip, PollMode: sockapi.PollAdaptive, Spin: o.spin, LinkRate: o.rate, RTO: o.rto(), CommodityTrim: o.commodityTrim(), IW: o.iw(), PullBatch: o.pullBatch}
		if o.poll == "busy" {
			cfg.PollMode = sockapi.PollBusy
		}
		if o.pcap != "" {
			cfg.CaptureFile = filepath.Join(o.pcap, capture)
		}
		return openStack(ns, ifname, cfg)
	}
	var err error
	if r.client, err = open(pair.A, v.A.Name, v.A.Addr.Addr(), "rpc-client.pcapng"); err != nil {
		return nil, err
	}
	if r.server, err = open(pair.B, v.B.Name, v.B.Addr.Addr(), "rpc-server.pcapng"); err != nil {
		r.client.Close()
		return nil, err
	}
	l, err := r.server.Listen(rpcNDPPort)
	if err != nil {
		r.close()
		return nil, err
	}
	defer l.Close()
	addr := sockapi.Addr{IP: v.B.Addr.Addr(), Port: rpcNDPPort}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < k; i++ {
		// A connection exists at the server once data arrives: the first
		// exchange (unmeasured) opens it.
		c, err := r.client.DialAddr(ctx, addr)
		if err != nil {
			r.close()
			return nil, err
		}
		r.cc = append(r.cc, c)
		if _, err := c.Write(r.req[i]); err != nil {
			r.close()
			return nil, err
		}
		l.SetDeadline(time.Now().Add(5 * time.Second))
		sc, err := l.AcceptNDP()
		if err != nil {
			r.close()
			return nil, err
		}
		r.sc = append(r.sc, sc)
		if _, err := io.ReadFull(sc, r.ebuf[i]); err != nil {
			r.close()
			return nil, err
		}
		if _, err := sc.Write(r.ebuf[i]); err != nil {
			r.close()
			return nil, err
		}
		if _, err := io.ReadFull(c, r.resp[i]); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (r *ndpConnRPC) name() string                            { return "ndp" }
func (r *ndpConnRPC) stacks() (client, server *sockapi.Stack) { return r.client, r.server }
func (r *ndpConnRPC) clients() int                            { return len(r.cc) }

func (r *ndpConnRPC) mode() string {
	pm := "PollAdaptive (spin, then sleep on the XSK fd)"
	if r.poll == "busy" {
		pm = "PollBusy"
	}
	if len(r.cc) > 1 {
		return fmt.Sprintf("embedded sockapi, %d persistent net.Conns, %s, default Config, a goroutine per client and per server connection", len(r.cc), pm)
	}
	return "embedded sockapi, persistent net.Conn, " + pm + ", default Config, pinned client and server threads"
}

func (r *ndpConnRPC) echo(stop *atomic.Bool) error {
	for _, c := range r.sc {
		c.SetReadDeadline(time.Time{})
	}
	// Unblock the servers' Reads when the turn ends (the clients are done).
	defer whenStopped(stop, func() {
		for _, c := range r.sc {
			c.SetReadDeadline(time.Unix(1, 0))
		}
	})()
	return echoEach(len(r.sc), func(i int) error {
		c, buf := r.sc[i], r.ebuf[i]
		for !stop.Load() {
			if _, err := io.ReadFull(c, buf); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					return nil
				}
				return fmt.Errorf("server read: %w", err)
			}
			if _, err := c.Write(buf); err != nil {
				return fmt.Errorf("server write: %w", err)
			}
		}
		return nil
	})
}

func (r *ndpConnRPC) roundTrip(timeout time.Duration) (time.Duration, error) {
	return r.roundTripOn(0, timeout)
}

func (r *ndpConnRPC) roundTripOn(i int, _ time.Duration) (time.Duration, error) {
	c := r.cc[i]
	t0 := time.Now()
	if _, err := c.Write(r.req[i]); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(c, r.resp[i]); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (r *ndpConnRPC) close() {
	for _, c := range append(r.cc, r.sc...) {
		c.Close()
	}
	r.client.Close()
	r.server.Close()
}

// tcpRPC: kernel TCP with blocking syscalls on the pinned threads.
type tcpKind int

const (
	tcpPersistent tcpKind = iota
	tcpNewConn
	tcpFastOpen
)

type tcpRPC struct {
	kind     tcpKind
	lfd      int   // server listening socket (namespace B)
	cfd, sfd []int // persistent: client and accepted server sockets, one pair per client
	// Several clients: the same sockets as Go net.Conns (the runtime's
	// netpoller), see newTCPRPC.
	cc, sc    []net.Conn
	nsA       *testbed.Namespace
	dst       unix.SockaddrInet4
	req, resp [][]byte // per client
	ebuf      [][]byte // per server connection
}

func newTCPRPC(pair *testbed.Pair, o rpcOpts, kind tcpKind) (*tcpRPC, error) {
	v := pair.Veth
	port := rpcTCPPort + int(kind) // the kinds share a pair on the switch
	t := &tcpRPC{kind: kind, lfd: -1, nsA: pair.A,
		dst: unix.SockaddrInet4{Addr: v.B.Addr.Addr().As4(), Port: port}}
	k := 1
	if kind == tcpPersistent {
		k = max(o.clients, 1)
	}
	t.req, t.resp, t.ebuf = rpcBuffers(k, o.size), rpcBuffers(k, o.size), rpcBuffers(k, o.size)
	err := pair.B.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		t.lfd = fd
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if kind == tcpFastOpen {
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN, 4096); err != nil {
				return fmt.Errorf("TCP_FASTOPEN: %w", err)
			}
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: v.B.Addr.Addr().As4(), Port: port}); err != nil {
			return err
		}
		// Accept wakes every 10ms to see the end of a turn.
		tv := unix.Timeval{Usec: 10_000}
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		return unix.Listen(fd, 4096)
	})
	if err != nil {
		t.close()
		return nil, err
	}
	for i := 0; kind == tcpPersistent && i < k; i++ {
		cfd, err := t.newClientSocket()
		if err != nil {
			t.close()
			return nil, err
		}
		t.cfd = append(t.cfd, cfd)
		if err := unix.Connect(cfd, &t.dst); err != nil {
			t.close()
			return nil, err
		}
		sfd, _, err := unix.Accept4(t.lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			t.close()
			return nil, err
		}
		t.sfd = append(t.sfd, sfd)
		tv := unix.Timeval{Usec: 10_000}
		unix.SetsockoptTimeval(sfd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
		unix.SetsockoptInt(sfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	// Several clients run as a Go service's connections do: net.Conns on
	// the runtime's netpoller, a goroutine each. With blocking read(2)s
	// on goroutines the runtime hands a P on only when sysmon sees its
	// thread blocked (20 µs to 10 ms), so clients started 7-31 ms into a
	// turn and kept 1.2-2.5 of 8 exchanges in flight (docs/latency.md).
	for i := 0; kind == tcpPersistent && k > 1 && i < k; i++ {
		for _, side := range []struct {
			fd    *int
			conns *[]net.Conn
		}{{&t.cfd[i], &t.cc}, {&t.sfd[i], &t.sc}} {
			f := os.NewFile(uintptr(*side.fd), "tcp")
			c, err := net.FileConn(f) // on a dup of the fd
			f.Close()
			*side.fd = -1
			if err != nil {
				t.close()
				return nil, err
			}
			*side.conns = append(*side.conns, c)
		}
	}
	return t, nil
}

// rpcBuffers returns k buffers of size bytes.
func rpcBuffers(k, size int) [][]byte {
	b := make([][]byte, k)
	for i := range b {
		b[i] = make([]byte, size)
	}
	return b
}

func (t *tcpRPC) newClientSocket() (int, error) {
	var fd int
	err := t.nsA.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, err
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	return fd, nil
}

func (t *tcpRPC) name() string {
	return [...]string{"tcp", "tcp-newconn", "tfo"}[t.kind]
}

func (t *tcpRPC) mode() string {
	if len(t.cc) > 1 {
		return fmt.Sprintf("kernel TCP, %d persistent connections, Go net.Conns (netpoller), a goroutine per client and per server connection", len(t.cc))
	}
	return [...]string{"kernel TCP, persistent connection, blocking syscalls",
		"kernel TCP, new connection per RPC (connect, write, read, close)",
		"kernel TCP Fast Open (MSG_FASTOPEN), new connection per RPC"}[t.kind]
}

func readFull(fd int, b []byte) error {
	for got := 0; got < len(b); {
		n, err := unix.Read(fd, b[got:])
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		got += n
	}
	return nil
}

func writeFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return err
		}
		b = b[n:]
	}
	return nil
}

func (t *tcpRPC) echo(stop *atomic.Bool) error {
	if t.kind == tcpPersistent {
		return echoEach(len(t.sfd), func(i int) error { return t.echoPersistent(i, stop) })
	}
	for !stop.Load() {
		fd, _, err := unix.Accept4(t.lfd, unix.SOCK_CLOEXEC)
		if err != nil {
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			return err
		}
		// The accepted socket inherits the listener's 10ms receive
		// timeout, meant only for accept: a slow client must not lose
		// its connection to it.
		var none unix.Timeval
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &none)
		err = readFull(fd, t.ebuf[0])
		if err == nil {
			err = writeFull(fd, t.ebuf[0])
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("%s server: %w", t.name(), err)
		}
	}
	return nil
}

// echoPersistent answers on server connection i until stop (its 10ms
// receive timeout lets it look). A request read in part when the timeout
// fires keeps its bytes: starting over lost them (a 64 KiB request arriving
// over more than 10 ms on a loaded machine), and client and server then
// waited for each other for good.
func (t *tcpRPC) echoPersistent(i int, stop *atomic.Bool) error {
	if t.sc != nil {
		return t.echoConn(i, stop)
	}
	fd, buf := t.sfd[i], t.ebuf[i]
	for got := 0; !stop.Load(); {
		n, err := unix.Read(fd, buf[got:])
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("tcp server: %w", err)
		case n == 0:
			return fmt.Errorf("tcp server: %w", io.ErrUnexpectedEOF)
		}
		if got += n; got < len(buf) {
			continue
		}
		got = 0
		if err := writeFull(fd, buf); err != nil {
			return fmt.Errorf("tcp server: %w", err)
		}
	}
	return nil
}

// echoConn is echoPersistent on server connection i's net.Conn: a 10ms
// read deadline lets it look at stop, and a request read in part keeps its
// bytes.
func (t *tcpRPC) echoConn(i int, stop *atomic.Bool) error {
	c, buf := t.sc[i], t.ebuf[i]
	for got := 0; !stop.Load(); {
		c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		n, err := c.Read(buf[got:])
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue
		case err != nil:
			return fmt.Errorf("tcp server: %w", err)
		}
		if got += n; got < len(buf) {
			continue
		}
		got = 0
		if _, err := c.Write(buf); err != nil {
			return fmt.Errorf("tcp server: %w", err)
		}
	}
	return nil
}

// echoEach runs serve(0..k-1) and returns the first error. One server
// runs on the caller's pinned thread; several run on goroutines of their
// own, as a Go service's connections do, none locked to a thread: a
// goroutine locked to its thread hands its P over to that thread every
// time it is scheduled (a futex wake and a sleep per turn), and a
// spinning waiter is scheduled on every poll.
func echoEach(k int, serve func(i int) error) error {
	if k == 1 {
		return serve(0)
	}
	errs := make(chan error, k)
	for i := 0; i < k; i++ {
		go func() { errs <- serve(i) }()
	}
	var err error
	for i := 0; i < k; i++ {
		if e := <-errs; err == nil {
			err = e
		}
	}
	return err
}

func (t *tcpRPC) clients() int { return max(len(t.cfd), 1) }

func (t *tcpRPC) roundTrip(timeout time.Duration) (time.Duration, error) {
	return t.roundTripOn(0, timeout)
}

func (t *tcpRPC) roundTripOn(i int, _ time.Duration) (time.Duration, error) {
	t0 := time.Now()
	req, resp := t.req[i], t.resp[i]
	if t.cc != nil {
		if _, err := t.cc[i].Write(req); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(t.cc[i], resp); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	if t.kind == tcpPersistent {
		if err := writeFull(t.cfd[i], req); err != nil {
			return 0, err
		}
		if err := readFull(t.cfd[i], resp); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	}
	// The socket is created in namespace A before the clock starts:
	// entering the namespace (setns) is a testbed artefact, not part of a
	// new connection's cost.
	fd, err := t.newClientSocket()
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	t0 = time.Now()
	if t.kind == tcpFastOpen {
		if err := unix.Sendto(fd, req, unix.MSG_FASTOPEN, &t.dst); err != nil {
			return 0, fmt.Errorf("sendto MSG_FASTOPEN: %w", err)
		}
	} else {
		if err := unix.Connect(fd, &t.dst); err != nil {
			return 0, err
		}
		if err := writeFull(fd, req); err != nil {
			return 0, err
		}
	}
	if err := readFull(fd, resp); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func (t *tcpRPC) close() {
	for _, c := range append(t.cc, t.sc...) {
		c.Close()
	}
	for _, fd := range append(append([]int{t.lfd}, t.cfd...), t.sfd...) {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

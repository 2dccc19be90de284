package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ndpstack/ndpstack/afxdp"
	"github.com/ndpstack/ndpstack/internal/sim"
	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
)

// throughput: one bulk transfer over a veth pair between two namespaces,
// NDP (embedded stacks: sockapi Dial, Write, CloseWrite on one side,
// Accept and Read to EOF on the other) against kernel TCP over the same
// pair. The payload is pseudo-random and generated before the clock
// starts; the receiver hashes what it reads (SHA-256, for both transports,
// inside the measured time) and the run fails unless the hash and length
// match the sender's. Time runs from Dial to the receiver's EOF. The
// transports take turns (--runs each) so load on the shared machine hits
// them alike; NDP stacks are opened fresh for each of its runs and closed
// before the TCP run, so kernel TCP runs without an XDP program on the
// veth (an attached one would cost TCP its GSO/GRO batching).
//
// With --mode daemon a third transport takes its turn: the same transfer
// between two applications attached to two ndpd processes (one per
// namespace, started fresh for each of its runs), every byte crossing the
// shared-memory rings at both ends.
//
// With --fabric switch the two hosts are joined by ndpswitch at --link
// instead (each on its own veth to the switch): NDP meets the switch's
// trimming queues and kernel TCP its drop-tail queue, in the same run; every
// run reports the switch's counters over it (and kernel TCP its
// retransmissions), and the same transfer in ndpsim at the same link rate
// is printed beside.
//
// With --compare xdp each round also measures the raw AF_XDP rate between
// the same two veth ends (xdp-tx for one second: one core sends MTU-sized
// UDP packets in 64-frame batches, one core takes them off its RX ring; no
// protocol, no copies into or out of sockets): the ceiling any AF_XDP stack
// meets on this host at this packet size, reported as ndp_over_xdp beside
// ndp_over_tcp.
//
// Not root: the same transfer runs on the simulator and says so.

func init() {
	register(&subcommand{
		name:    "throughput",
		summary: "one bulk transfer over a veth pair: NDP vs kernel TCP, Mb/s, SHA-256 verified, NDP counters (root; simulator otherwise)",
		run:     runThroughput,
	})
}

type throughputOpts struct {
	size int64
	mtu  int
	rate int64
	runs int
	poll string
	mode string // "embedded" (ndp embedded, tcp) or "daemon" (ndp through ndpd too)
	xdp  bool   // --compare xdp: the raw AF_XDP rate each round
	json bool
	prof profileFlags
	fabricFlags
}

func parseThroughputFlags(args []string) (throughputOpts, error) {
	fs := flag.NewFlagSet("throughput", flag.ContinueOnError)
	size := byteSize(100e6)
	fs.Var(&size, "size", "bytes to transfer per run (e.g. 100MB, 1GiB; at most 4GiB)")
	mtu := fs.Int("mtu", 0, "MTU of both veth ends, 1280..9000 (0: 1500); NDP packets use all of it (above 3826 as AF_XDP multi-buffer chains of 4 KB frames)")
	rate := bitRate(10e9)
	fs.Var(&rate, "rate", "NDP receiver's pull pacer rate (bits/s): a cap on NDP's throughput")
	runs := fs.Int("runs", 3, "runs per transport, taking turns")
	poll := fs.String("poll", "adaptive", "NDP waiting: adaptive (spin, then sleep) or busy (spin until done)")
	mode := fs.String("mode", "embedded", "embedded (ndp embedded stacks vs kernel TCP) or daemon (also ndp through two ndpd processes, in the same run)")
	compare := fs.String("compare", "", "xdp: also the raw AF_XDP rate between the same veth ends each round (one second of MTU-sized UDP packets, one core sending, one receiving): the ceiling of any AF_XDP stack here")
	asJSON := fs.Bool("json", false, "print JSON")
	fab := registerFabricFlags(fs, "veth", "one veth pair")
	var prof profileFlags
	prof.register(fs)
	if err := fs.Parse(args); err != nil {
		return throughputOpts{}, err
	}
	if fs.NArg() > 0 {
		return throughputOpts{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := throughputOpts{size: int64(size), mtu: *mtu, rate: int64(rate), runs: *runs, poll: *poll, mode: *mode, xdp: *compare == "xdp", json: *asJSON, prof: prof}
	if *compare != "" && *compare != "xdp" {
		return throughputOpts{}, fmt.Errorf("--compare %q: want xdp or nothing", *compare)
	}
	var err error
	if o.fabricFlags, err = fab.parse(fs, &o.rate); err != nil {
		return throughputOpts{}, err
	}
	return o, o.validate()
}

func (o throughputOpts) validate() error {
	switch {
	case o.size < 1 || o.size > 4<<30:
		return fmt.Errorf("--size %d: want 1 byte..4GiB", o.size)
	case o.mtu != 0 && (o.mtu < 1280 || o.mtu > 9000):
		return fmt.Errorf("--mtu %d: want 1280..9000", o.mtu)
	case o.rate < 1e6:
		return fmt.Errorf("--rate %d: want at least 1M", o.rate)
	case o.runs < 1 || o.runs > 100:
		return fmt.Errorf("--runs %d: want 1..100", o.runs)
	case o.poll != "adaptive" && o.poll != "busy":
		return fmt.Errorf("--poll %q: want adaptive or busy", o.poll)
	case o.mode != "" && o.mode != "embedded" && o.mode != "daemon":
		return fmt.Errorf("--mode %q: want embedded or daemon", o.mode)
	case o.mode == "daemon" && o.on():
		return errors.New("--mode daemon runs on the veth pair only (not with --fabric switch)")
	case o.xdp && o.on():
		return errors.New("--compare xdp runs on the veth pair only (not with --fabric switch)")
	case o.xdp && o.mtu > maxXDPTxPacket:
		return fmt.Errorf("--compare xdp: MTU %d does not fit one UMEM frame (at most %d)", o.mtu, maxXDPTxPacket)
	}
	return o.fabricFlags.validate()
}

type throughputRun struct {
	Transport string  `json:"transport"`
	Run       int     `json:"run"`
	Seconds   float64 `json:"seconds"`
	Mbps      float64 `json:"mbps"`
	Bytes     int64   `json:"bytes"`
	Verified  bool    `json:"sha256_verified"`
	// CPUMs is this process's CPU time (user and system, every thread)
	// over the run: both NDP stacks, or both kernel TCP ends with their
	// in-process softirq work, and the receiver's hashing. Spinning
	// waiters count. Read beside Bytes it is the CPU per megabyte, which
	// a loaded machine changes far less than the rate.
	CPUMs float64 `json:"process_cpu_ms,omitempty"`
	// NDP only: the sending and receiving stacks' counters for the run.
	Sender   *ndpCounters `json:"sender_counters,omitempty"`
	Receiver *ndpCounters `json:"receiver_counters,omitempty"`
	// --fabric switch: the switch over the run; kernel TCP: the sender's
	// retransmissions.
	Switch *switchCounters `json:"switch,omitempty"`
	TCP    *tcpCounters    `json:"tcp,omitempty"`
	// --compare xdp: the raw AF_XDP measurement behind this run's rate
	// (Mbps is its received rate; nothing is verified).
	XDP *xdpTxResult `json:"xdp,omitempty"`
}

type throughputSummary struct {
	Transport  string  `json:"transport"`
	MedianMbps float64 `json:"median_mbps"`
	MinMbps    float64 `json:"min_mbps"`
	MaxMbps    float64 `json:"max_mbps"`
}

type throughputOutput struct {
	Size    int64               `json:"size_bytes"`
	MTU     int                 `json:"mtu"`
	RateBps int64               `json:"ndp_pull_rate_bps"`
	Poll    string              `json:"ndp_poll"`
	Summary []throughputSummary `json:"summary"`
	// NDPOverTCP is the ratio of the median rates.
	NDPOverTCP float64 `json:"ndp_over_tcp,omitempty"`
	// DaemonOverEmbedded (--mode daemon) is the ratio of the median rates
	// of NDP through ndpd and embedded NDP.
	DaemonOverEmbedded float64 `json:"daemon_over_embedded,omitempty"`
	// NDPOverPullRate is NDP's median goodput over the receiver's
	// configured pull rate (RateBps): 1 means every pull slot carried a
	// full payload's worth of the transfer.
	NDPOverPullRate float64 `json:"ndp_over_pull_rate,omitempty"`
	// --compare xdp: NDP's and kernel TCP's median rates over the raw
	// AF_XDP rate between the same ends.
	NDPOverXDP float64         `json:"ndp_over_xdp,omitempty"`
	TCPOverXDP float64         `json:"tcp_over_xdp,omitempty"`
	Runs       []throughputRun `json:"runs"`
	// --fabric switch: "switch" and the port rate; Sim is the same transfer
	// in ndpsim (same link rate, MTU and 8-packet queues) and SimOverSwitch
	// its rate over NDP's median through the switch.
	Fabric        string         `json:"fabric"`
	LinkBps       int64          `json:"link_bps,omitempty"`
	Sim           *throughputRun `json:"sim,omitempty"`
	SimOverSwitch float64        `json:"sim_over_switch,omitempty"`
	CPUs          int            `json:"cpus"`
	Setup         string         `json:"setup"`
}

func runThroughput(args []string) error {
	o, err := parseThroughputFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return throughputSim(o)
	}
	fmt.Fprintln(os.Stderr, "ndpperf throughput: building a two-namespace veth testbed...")
	out, err := throughputTestbed(o)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "ndpperf throughput: testbed removed.")
	return printThroughput(out, o.json)
}

func printThroughput(out throughputOutput, asJSON bool) error {
	if asJSON {
		return printJSON(out)
	}
	fmt.Printf("Bulk transfer of %d bytes (%s)\n", out.Size, out.Setup)
	fmt.Printf("%-10s %4s %10s %10s %9s %8s\n", "transport", "run", "seconds", "Mb/s", "verified", "CPU_ms")
	for _, r := range out.Runs {
		fmt.Printf("%-10s %4d %10.3f %10.0f %9v %8.0f\n", r.Transport, r.Run, r.Seconds, r.Mbps, r.Verified, r.CPUMs)
	}
	fmt.Printf("%-10s %12s %10s %10s\n", "transport", "median_Mb/s", "min", "max")
	for _, s := range out.Summary {
		fmt.Printf("%-10s %12.0f %10.0f %10.0f\n", s.Transport, s.MedianMbps, s.MinMbps, s.MaxMbps)
	}
	if out.NDPOverTCP > 0 {
		fmt.Printf("ndp / tcp median: %.2f\n", out.NDPOverTCP)
	}
	if out.DaemonOverEmbedded > 0 {
		fmt.Printf("ndp-daemon / ndp median: %.2f\n", out.DaemonOverEmbedded)
	}
	if out.NDPOverPullRate > 0 {
		fmt.Printf("ndp median / pull rate: %.2f\n", out.NDPOverPullRate)
	}
	if out.Sim != nil {
		fmt.Printf("ndpsim, same transfer at the same link rate: %.0f Mb/s (sim / switch median: %.2f)\n", out.Sim.Mbps, out.SimOverSwitch)
	}
	for _, r := range out.Runs {
		if r.Sender != nil || r.Switch != nil || r.TCP != nil {
			fmt.Printf("%s run %d counters:\n", r.Transport, r.Run)
		}
		if r.Sender != nil {
			r.Sender.print(os.Stdout, "sender  ")
			if r.Receiver != nil {
				r.Receiver.print(os.Stdout, "receiver")
			}
		}
		if r.TCP != nil {
			fmt.Printf("  tcp sender: retransmitted segments %d, RTO fires %d, fast retransmits %d\n", r.TCP.RetransSegs, r.TCP.Timeouts, r.TCP.FastRetrans)
		}
		if r.Switch != nil {
			r.Switch.print(os.Stdout)
		}
	}
	return nil
}

// throughputPayload is size pseudo-random bytes (seeded: the same every
// run) and their SHA-256.
func throughputPayload(size int64) ([]byte, [32]byte) {
	p := make([]byte, size)
	rng := rand.New(rand.NewPCG(0x6e6470, uint64(size)))
	i := 0
	for ; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], rng.Uint64())
	}
	for ; i < len(p); i++ {
		p[i] = byte(rng.Uint32())
	}
	return p, sha256.Sum256(p)
}

// received is what a receiver read: its length, hash and when it saw EOF.
type received struct {
	n     int64
	sum   [32]byte
	first time.Time // the first byte's read
	end   time.Time
	err   error
}

// readAndHash reads r to EOF, hashing as it goes.
func readAndHash(r io.Reader) received {
	h := sha256.New()
	buf := make([]byte, 256<<10)
	var (
		n     int64
		first time.Time
	)
	for {
		m, err := r.Read(buf)
		if m > 0 && n == 0 {
			first = time.Now()
		}
		h.Write(buf[:m])
		n += int64(m)
		if err == io.EOF {
			res := received{first: first}
			res.n, res.end = n, time.Now()
			copy(res.sum[:], h.Sum(nil))
			return res
		}
		if err != nil {
			return received{n: n, first: first, end: time.Now(), err: err}
		}
	}
}

// throughputTimeout bounds one run: generous, so only a stall trips it.
func throughputTimeout(size int64) time.Duration {
	return 30*time.Second + time.Duration(size/(5<<20))*time.Second
}

func throughputTestbed(o throughputOpts) (throughputOutput, error) {
	if err := o.validate(); err != nil {
		return throughputOutput{}, err
	}
	out := throughputOutput{Size: o.size, MTU: mtuOr1500(o.mtu), RateBps: o.rate, Poll: o.poll, CPUs: runtime.NumCPU()}
	out.Setup = fmt.Sprintf("two namespaces joined by one veth pair, MTU %d; NDP embedded stacks (%s polling, pull pacer %s b/s, IW %d packets), kernel TCP on the same pair without XDP; receiver hashes, time from dial to the receiver's EOF",
		out.MTU, o.poll, formatRate(float64(o.rate)), o.iwPackets(out.MTU))
	if o.mode == "daemon" {
		out.Setup += "; ndp-daemon: the same transfer between applications attached to two ndpd processes (one per namespace, started for each run, each core loop pinned to its own CPU, adaptive), sockapi.Attach defaults"
	}
	payload, sum := throughputPayload(o.size)
	tb, err := newTestbed()
	if err != nil {
		return out, err
	}
	defer tb.Close()
	var pair *testbed.Pair
	var sw *softswitch.Switch
	out.Fabric = "veth"
	if o.on() {
		if pair, sw, err = o.pair(tb, o.mtu); err != nil {
			return out, err
		}
		out.Fabric, out.LinkBps = "switch", o.link
		out.Setup = strings.Replace(out.Setup, "two namespaces joined by one veth pair", "two namespaces on "+o.setup(sw), 1)
		out.Setup = strings.Replace(out.Setup, "on the same pair without XDP", "through the same switch", 1)
	} else if pair, err = tb.NewPair(testbed.VethConfig{AddrA: "10.204.0.1/24", AddrB: "10.204.0.2/24", MTU: o.mtu}); err != nil {
		return out, err
	}
	// measured runs fn and adds the process's CPU time and the switch's
	// counters over it.
	measured := func(fn func() (throughputRun, error)) (throughputRun, error) {
		before, cpu := switchStats(sw), processCPU().total()
		r, err := fn()
		r.CPUMs = float64((processCPU().total() - cpu).Microseconds()) / 1000
		if sw != nil && err == nil {
			r.Switch = newSwitchCounters(sw.Stats().Sub(before), 1)
		}
		return r, err
	}
	stopProf, err := o.prof.start()
	if err != nil {
		return out, err
	}
	defer stopProf()
	for r := 1; r <= o.runs; r++ {
		nr, err := measured(func() (throughputRun, error) { return throughputNDP(pair, o, payload, sum) })
		if err != nil {
			return out, fmt.Errorf("ndp run %d: %w", r, err)
		}
		nr.Run = r
		out.Runs = append(out.Runs, nr)
		if o.mode == "daemon" {
			dr, err := throughputDaemon(pair, o, payload, sum)
			if err != nil {
				return out, fmt.Errorf("ndp-daemon run %d: %w", r, err)
			}
			dr.Run = r
			out.Runs = append(out.Runs, dr)
		}
		tr, err := measured(func() (throughputRun, error) { return throughputTCP(pair, o, payload, sum) })
		if err != nil {
			return out, fmt.Errorf("tcp run %d: %w", r, err)
		}
		tr.Run = r
		out.Runs = append(out.Runs, tr)
		if o.xdp {
			xr, err := throughputXDP(pair, out.MTU)
			if err != nil {
				return out, fmt.Errorf("xdp run %d: %w", r, err)
			}
			xr.Run = r
			out.Runs = append(out.Runs, xr)
		}
	}
	if err := stopProf(); err != nil {
		return out, err
	}
	out.Summary = summarizeThroughput(out.Runs)
	median := map[string]float64{}
	for _, s := range out.Summary {
		median[s.Transport] = s.MedianMbps
	}
	if median["tcp"] > 0 {
		out.NDPOverTCP = median["ndp"] / median["tcp"]
	}
	if median["ndp"] > 0 && median["ndp-daemon"] > 0 {
		out.DaemonOverEmbedded = median["ndp-daemon"] / median["ndp"]
	}
	if median["xdp"] > 0 {
		out.NDPOverXDP = median["ndp"] / median["xdp"]
		out.TCPOverXDP = median["tcp"] / median["xdp"]
	}
	if len(out.Summary) > 0 {
		out.NDPOverPullRate = out.Summary[0].MedianMbps * 1e6 / float64(o.rate)
	}
	if o.on() {
		so := o
		so.rate = o.link
		simOut, err := throughputSimRun(so)
		if err != nil {
			return out, fmt.Errorf("ndpsim: %w", err)
		}
		out.Sim = &simOut.Runs[0]
		if median["ndp"] > 0 {
			out.SimOverSwitch = out.Sim.Mbps / median["ndp"]
		}
	}
	return out, nil
}

// summarizeThroughput returns each transport's median, min and max rate, in
// the order the transports first appear in runs.
func summarizeThroughput(runs []throughputRun) []throughputSummary {
	var order []string
	by := map[string][]float64{}
	for _, r := range runs {
		if _, ok := by[r.Transport]; !ok {
			order = append(order, r.Transport)
		}
		by[r.Transport] = append(by[r.Transport], r.Mbps)
	}
	var res []throughputSummary
	for _, t := range order {
		v := by[t]
		sort.Float64s(v)
		res = append(res, throughputSummary{Transport: t, MedianMbps: v[len(v)/2], MinMbps: v[0], MaxMbps: v[len(v)-1]})
	}
	return res
}

func finishRun(name string, start time.Time, got received, size int64, sum [32]byte) (throughputRun, error) {
	if got.err != nil {
		return throughputRun{}, fmt.Errorf("receiver after %d of %d bytes: %w", got.n, size, got.err)
	}
	r := throughputRun{Transport: name, Bytes: got.n, Verified: got.n == size && bytes.Equal(got.sum[:], sum[:])}
	if !r.Verified {
		return r, fmt.Errorf("received %d of %d bytes, SHA-256 match %v", got.n, size, bytes.Equal(got.sum[:], sum[:]))
	}
	d := got.end.Sub(start)
	r.Seconds = d.Seconds()
	r.Mbps = float64(size) * 8 / d.Seconds() / 1e6
	return r, nil
}

func throughputNDP(pair *testbed.Pair, o throughputOpts, payload []byte, sum [32]byte) (throughputRun, error) {
	cfg := sockapi.Config{LinkRate: o.rate, CommodityTrim: o.commodityTrim(), RTO: o.rto(), IW: o.iw(), PullBatch: o.pullBatch}
	if o.poll == "busy" {
		cfg.PollMode = sockapi.PollBusy
	}
	var snd, rcv *sockapi.Stack
	defer func() {
		for _, s := range []*sockapi.Stack{snd, rcv} {
			if s != nil {
				s.Close()
			}
		}
	}()
	var err error
	if snd, err = openStack(pair.A, pair.Veth.A.Name, cfg); err != nil {
		return throughputRun{}, err
	}
	if rcv, err = openStack(pair.B, pair.Veth.B.Name, cfg); err != nil {
		return throughputRun{}, err
	}
	return transferNDP("ndp", snd, rcv, pair, o, payload, sum)
}

// throughputDaemon is throughputNDP through two ndpd processes: their core
// loops pinned to CPUs 0 and 1 (as rpc --mode daemon --cores shared does),
// the sending and receiving applications attached with sockapi's defaults.
func throughputDaemon(pair *testbed.Pair, o throughputOpts, payload []byte, sum [32]byte) (throughputRun, error) {
	if startNdpds == nil {
		return throughputRun{}, errors.New("--mode daemon needs Linux")
	}
	c0, c1 := cpuPair()
	d, err := startNdpds(pair, [2]string{strconv.Itoa(c0), strconv.Itoa(c1)}, 1, o.rate)
	if err != nil {
		return throughputRun{}, err
	}
	defer d.close()
	snd, err := sockapi.Attach(d.sock(0))
	if err != nil {
		return throughputRun{}, err
	}
	defer snd.Close()
	rcv, err := sockapi.Attach(d.sock(1))
	if err != nil {
		return throughputRun{}, err
	}
	defer rcv.Close()
	return transferNDP("ndp-daemon", snd, rcv, pair, o, payload, sum)
}

// transferNDP moves payload from snd (in A) to rcv (in B) and reports the
// run as transport name, with both stacks' counters.
func transferNDP(name string, snd, rcv *sockapi.Stack, pair *testbed.Pair, o throughputOpts, payload []byte, sum [32]byte) (throughputRun, error) {
	l, err := rcv.Listen(9)
	if err != nil {
		return throughputRun{}, err
	}
	defer l.Close()
	deadline := time.Now().Add(throughputTimeout(o.size))
	got := make(chan received, 1)
	go func() {
		l.SetDeadline(deadline)
		c, err := l.AcceptNDP()
		if err != nil {
			got <- received{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		got <- readAndHash(c)
	}()
	start := time.Now()
	c, err := snd.Dial(context.Background(), pair.Veth.B.Addr.Addr().String()+":9", sockapi.WithDialTimeout(5*time.Second))
	if err != nil {
		return throughputRun{}, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if _, err := c.Write(payload); err != nil {
		return throughputRun{}, fmt.Errorf("write: %w", err)
	}
	if err := c.CloseWrite(); err != nil {
		return throughputRun{}, err
	}
	r, err := finishRun(name, start, <-got, o.size, sum)
	if err != nil {
		return r, err
	}
	// The receiver closed its side after EOF: the sender reads EOF, so its
	// Close is graceful.
	if _, err := io.Copy(io.Discard, c); err != nil {
		return r, fmt.Errorf("sender reading the receiver's close: %w", err)
	}
	sc, rc := stackCounters(snd), stackCounters(rcv)
	r.Sender, r.Receiver = &sc, &rc
	return r, nil
}

// daemons is a running pair of ndpd processes (ndpdPair on Linux).
type daemons interface {
	sock(side int) string
	close()
}

// startNdpds starts an ndpd in each namespace of pair (Linux: ndpd-child
// processes), each serving queues 0..queues-1 with its core loops on cpus
// (a comma-separated list per side), pull pacer at rate bits/s.
var startNdpds func(pair *testbed.Pair, cpus [2]string, queues int, rate int64) (daemons, error)

// throughputXDP measures the raw AF_XDP rate from pair's A end to its B end
// with mtu-byte packets for one second (xdp-tx), as UDP payload bytes
// received.
func throughputXDP(pair *testbed.Pair, mtu int) (throughputRun, error) {
	res, err := xdpTx(pair, time.Second, 64, mtu, afxdp.AttachAuto)
	if err != nil {
		return throughputRun{}, err
	}
	// Goodput, as for the transports: the UDP payload each packet carries.
	payload := int64(res.PacketBytes - 28)
	return throughputRun{Transport: "xdp", Seconds: res.DurationS, Mbps: res.ReceivedFPS * float64(payload*8) / 1e6,
		Bytes: int64(res.ReceivedFrames) * payload, XDP: &res}, nil
}

func throughputTCP(pair *testbed.Pair, o throughputOpts, payload []byte, sum [32]byte) (throughputRun, error) {
	addr := pair.Veth.B.Addr.Addr().String() + ":9912"
	var ln net.Listener
	if err := pair.B.Do(func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		return throughputRun{}, err
	}
	defer ln.Close()
	deadline := time.Now().Add(throughputTimeout(o.size))
	got := make(chan received, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- received{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		got <- readAndHash(c)
	}()
	before, err := readTCPCounters(pair.A)
	if err != nil {
		return throughputRun{}, err
	}
	start := time.Now()
	var c net.Conn
	if err := pair.A.Do(func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, 5*time.Second)
		return err
	}); err != nil {
		return throughputRun{}, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	if _, err := c.Write(payload); err != nil {
		return throughputRun{}, fmt.Errorf("write: %w", err)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return throughputRun{}, errors.New("not a TCP connection")
	}
	if err := tc.CloseWrite(); err != nil {
		return throughputRun{}, err
	}
	r, err := finishRun("tcp", start, <-got, o.size, sum)
	if err != nil {
		return r, err
	}
	after, err := readTCPCounters(pair.A)
	if err != nil {
		return r, err
	}
	d := after.sub(before)
	r.TCP = &d
	return r, nil
}

// throughputSim is the unprivileged fallback: the same transfer on the
// simulator.
func throughputSim(o throughputOpts) error {
	fmt.Fprintln(os.Stderr, "ndpperf throughput: not root, so no veth testbed (network namespaces and AF_XDP need root).")
	fmt.Fprintf(os.Stderr, "  Running the same transfer on the simulator instead: real ndp endpoints and pull queues, two hosts\n")
	fmt.Fprintf(os.Stderr, "  on one NDP switch (%s b/s links, 1 µs delay), virtual time, one run. Kernel TCP needs root; skipped.\n", formatRate(float64(o.rate)))
	out, err := throughputSimRun(o)
	if err != nil {
		return err
	}
	return printThroughput(out, o.json)
}

// throughputSimRun runs the transfer on the simulator.
func throughputSimRun(o throughputOpts) (throughputOutput, error) {
	if err := o.validate(); err != nil {
		return throughputOutput{}, err
	}
	mtu := mtuOr1500(o.mtu)
	res, err := sim.RunTransfer(sim.TransferConfig{Star: simStar(float64(o.rate), mtu), Size: o.size})
	if err != nil {
		return throughputOutput{}, err
	}
	if !res.BytesVerified {
		return throughputOutput{}, fmt.Errorf("simulated transfer: bytes not verified (%s)", res.FirstError)
	}
	secs := res.LastFCTus / 1e6
	c := ndpCounters{Retransmits: res.Retransmits, RTOFires: res.RTOs, NacksIn: res.Nacks, TrimmedIn: res.Trimmed, DataOut: res.DataPackets}
	run := throughputRun{Transport: "ndp (sim)", Run: 1, Seconds: secs, Mbps: float64(o.size) * 8 / secs / 1e6, Bytes: o.size, Verified: true, Sender: &c}
	out := throughputOutput{Size: o.size, MTU: mtu, RateBps: o.rate, Poll: "simulated", Runs: []throughputRun{run},
		Summary: summarizeThroughput([]throughputRun{run}), CPUs: runtime.NumCPU(), NDPOverPullRate: run.Mbps * 1e6 / float64(o.rate),
		Setup: "simulator: not root, no testbed; virtual time; counters summed over both hosts"}
	return out, nil
}

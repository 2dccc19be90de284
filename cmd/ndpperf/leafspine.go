package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/internal/sim"
	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/sockapi"
)

// leafspine: a permutation of bulk flows across a two-tier leaf-spine fabric
// (internal/softswitch, one process emulating every leaf, spine and link):
// host i sends --size bytes to host i + hosts-per-leaf, so every flow
// crosses from one leaf to the other through the spines. NDP sprays each
// flow's packets over its UDP source ports, which the leaves' ECMP hash maps
// to the spines; kernel TCP's flows each take the one spine their 5-tuple
// hashes to. Each flow's rate is its bytes over the time from the common
// start to its receiver's EOF (SHA-256 verified); the fraction is that rate
// over the link rate. --degrade F cuts the link between leaf 1 and spine 1
// (both directions) to 1/F of the rate: the per-link counters show where the
// bytes went and the stacks' counters how many paths their scoreboards left
// out.

func init() {
	register(&subcommand{
		name:    "leafspine",
		summary: "permutation of bulk flows across a leaf-spine fabric of ndpswitch: NDP vs kernel TCP, per-flow fraction of link rate, per-spine-link counters (root)",
		run:     runLeafSpine,
	})
}

type leafSpineOpts struct {
	link, spines, perLeaf int
	rate                  int64
	size                  int64
	runs                  int
	degrade               int
	rto                   time.Duration
	hostQueue             int
	mtu                   int
	iw                    int
	tcp                   bool
	json                  bool
	switchTick            time.Duration
	// spin is the NDP stacks' sockapi.Config.Spin when spinFixed (--spin
	// with a duration or never); otherwise pickSpin picks it (auto).
	spin      time.Duration
	spinFixed bool
	timeline  string
	prof      profileFlags
}

// lsPullBatch is engine.Config.PullBatch's default: a receiver that finds a
// PULL due releases those of the next 7 slots with it.
const lsPullBatch = 8

// lsHostDelay is the time a stack of this testbed may go unscheduled. The
// four stacks, their applications and the switch thread share the machine's
// CPUs with each other and with whatever else runs: at load 12-18 on two CPUs
// all four stacks stop at once for 8-18 ms at a time (docs/datapath.md, "The
// leaf-spine permutation").
const lsHostDelay = 10 * time.Millisecond

// leafSpineIW is the NDP stacks' initial window, which is also the number of
// tokens a flow circulates (one PULL per arrival). It covers a round trip of
// this testbed at the link rate: two pull batches (the receiver releases
// lsPullBatch PULLs at once, and the sender's NIC link sends the packets they
// elicit one frame time apart), the four store-and-forward hops of a DATA
// frame, and lsHostDelay. Never less than switchIW, the paper's 30, nor more
// than the receive buffer holds (a first window beyond it is NACKed for want
// of buffer): at MTU 3500, 30 at 20 Mb/s, 38 at 50 Mb/s, 56 at 100 Mb/s, 76
// from 200 Mb/s.
func leafSpineIW(rate int64, mtu int) int {
	slot := float64(mtu+14+24) * 8 / float64(rate) // seconds per frame on the wire
	iw := max(switchIW, 2*lsPullBatch+4+int(math.Ceil(lsHostDelay.Seconds()/slot)))
	return min(iw, lsRecvBuffer/ndp.MaxPayload(mtu))
}

// lsRecvBuffer is ndp.Config.RecvBuffer's default, the stacks' receive buffer.
const lsRecvBuffer = 256 << 10

func parseLeafSpineFlags(args []string) (leafSpineOpts, error) {
	fs := flag.NewFlagSet("leafspine", flag.ContinueOnError)
	rate := bitRate(200e6)
	fs.Var(&rate, "link", "emulated rate of every link (host-leaf and leaf-spine), bits/s")
	size := byteSize(4e6)
	fs.Var(&size, "size", "bytes per flow")
	spines := fs.Int("spines", 2, "spines (2..16)")
	perLeaf := fs.Int("hosts-per-leaf", 2, "hosts on each of the two leaves")
	runs := fs.Int("runs", 3, "runs per transport, taking turns")
	degrade := fs.Int("degrade", 0, "cut the leaf 1 - spine 1 link to 1/N of --link (0: healthy fabric)")
	rto := fs.Duration("rto", 0, "NDP retransmission timeout (0: 1ms, or the time 3 hops of 8-packet queues take to drain at --link if longer, x4)")
	hostQ := fs.Int("host-queue", 256, "emulate each host's link into its leaf at --link with a NIC queue of this many frames (0: frames enter the leaf as fast as the veth delivers them)")
	mtu := fs.Int("mtu", 3500, "MTU of every veth, 1280..3500 (native XDP on a veth, which the switch's ports use, allows at most 3506 with 4 KiB pages); at 1500 the ACK and PULL each host sends for the flow it receives take about 10% of the link its own flow leaves by")
	iw := fs.Int("iw", 0, "NDP initial window in packets (0: the paper's 30, or a round trip of this testbed at --link if more: two pull batches, four hops and 10 ms of host delay)")
	tcp := fs.Bool("tcp", true, "also run kernel TCP (cubic) through the same fabric")
	spin := fs.String("spin", "auto", spinUsage)
	swTick := fs.String("switch-tick", "auto", switchTickUsage)
	timeline := fs.String("timeline", "", "append to this CSV file the switch's host-port counters, sampled every millisecond of every run (transport, run, µs since the run's start, port, NIC link, frames offered, frames sent, bytes sent, NDP frames trimmed)")
	asJSON := fs.Bool("json", false, "print JSON")
	var prof profileFlags
	prof.register(fs)
	if err := fs.Parse(args); err != nil {
		return leafSpineOpts{}, err
	}
	if fs.NArg() > 0 {
		return leafSpineOpts{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	spinD, spinFixed, err := parseSpin(*spin)
	if err != nil {
		return leafSpineOpts{}, err
	}
	tick, err := parseSwitchTick(*swTick)
	if err != nil {
		return leafSpineOpts{}, err
	}
	o := leafSpineOpts{rate: int64(rate), size: int64(size), spines: *spines, perLeaf: *perLeaf, runs: *runs, degrade: *degrade, rto: *rto, hostQueue: *hostQ, mtu: *mtu, iw: *iw, tcp: *tcp, json: *asJSON, prof: prof, switchTick: tick, timeline: *timeline, spin: spinD, spinFixed: spinFixed}
	switch {
	case o.rate < 1e6 || o.rate > 100e9:
		return o, fmt.Errorf("--link %d: want 1M..100G", o.rate)
	case o.size < 1 || o.size > 1<<30:
		return o, fmt.Errorf("--size %d: want 1 byte..1GiB", o.size)
	case o.spines < 2 || o.spines > 16:
		return o, fmt.Errorf("--spines %d: want 2..16", o.spines)
	case o.perLeaf < 1 || o.perLeaf > 8:
		return o, fmt.Errorf("--hosts-per-leaf %d: want 1..8", o.perLeaf)
	case o.runs < 1 || o.runs > 100:
		return o, fmt.Errorf("--runs %d: want 1..100", o.runs)
	case o.mtu < 1280 || o.mtu > 3500:
		return o, fmt.Errorf("--mtu %d: want 1280..3500", o.mtu)
	case o.degrade < 0 || o.degrade == 1 || int64(o.degrade) > o.rate/1e6:
		return o, fmt.Errorf("--degrade %d: want 0 or 2..link/1M", o.degrade)
	case o.iw < 0 || o.iw > 1000:
		return o, fmt.Errorf("--iw %d: want 0..1000", o.iw)
	}
	if o.switchTick == autoTick {
		o.switchTick = switchTickFor(o.rate, o.mtu)
	}
	if o.iw == 0 {
		o.iw = leafSpineIW(o.rate, o.mtu)
	}
	if o.rto == 0 {
		o.rto = max(time.Millisecond, 4*3*8*time.Duration(int64(o.mtu+14)*8*1e9/o.rate))
	}
	return o, nil
}

// lsFlow is one flow of a run.
type lsFlow struct {
	From     int     `json:"from"`
	To       int     `json:"to"`
	Mbps     float64 `json:"mbps"`
	Fraction float64 `json:"fraction_of_link"`
	Verified bool    `json:"sha256_verified"`
	// FirstByteMs is when the receiver read the flow's first byte, from
	// the common start (before the dials); Seconds is its EOF, from the
	// same start (Mbps is the flow's bytes over it).
	FirstByteMs float64 `json:"first_byte_ms"`
	Seconds     float64 `json:"seconds"`
	// LateSlots (NDP) are the pull slots the receiver's stack lost over the
	// run, its pull queue polled more than PullBurst slots late
	// (pullpacer.QueueStats.LateSlots): link time the flow never pulled.
	LateSlots uint64 `json:"pull_late_slots,omitempty"`
}

// lsLink is one leaf-spine link's counters over a run.
type lsLink struct {
	Name string `json:"name"`
	// Offered counts the frames that arrived at the link's queues (NDP and
	// other), Frames those it carried (trimmed headers included).
	Offered uint64 `json:"offered"`
	Frames  uint64 `json:"frames"`
	Bytes   uint64 `json:"bytes"`
	Trimmed uint64 `json:"ndp_trimmed"`
	Drops   uint64 `json:"tcp_drops"`
	// LostMs is the link time the switch lost with frames queued (passes
	// late by more than its catch-up; softswitch.PortStats.LostNs).
	LostMs float64 `json:"lost_ms,omitempty"`
}

// lsPort is a host-facing port's counters over a run.
type lsPort struct {
	Name      string  `json:"name"`
	NIC       bool    `json:"nic,omitempty"`
	Offered   uint64  `json:"offered"`
	Frames    uint64  `json:"frames"`
	Trimmed   uint64  `json:"ndp_trimmed"`
	Drops     uint64  `json:"drops"` // NDP drops and drop-tail drops
	MaxData   int     `json:"max_data_frames"`
	MaxOther  int     `json:"max_other_frames"`
	MeanAhead float64 `json:"mean_data_ahead"`
	LostMs    float64 `json:"lost_ms,omitempty"`
}

type lsRun struct {
	Transport string   `json:"transport"`
	Run       int      `json:"run"`
	Flows     []lsFlow `json:"flows"`
	Links     []lsLink `json:"spine_links"`
	// NDP: the senders' scoreboard exclusions and NACKs, summed.
	PathsExcluded uint64 `json:"paths_excluded,omitempty"`
	NacksIn       uint64 `json:"nacks_in,omitempty"`
	Retransmits   uint64 `json:"retransmits,omitempty"`
	// Stacks sums the NDP stacks' counters over the run (pacer, RTO, link).
	Stacks *ndpCounters `json:"stacks,omitempty"`
	// HostPorts are the leaves' ports toward the hosts and the hosts' NIC
	// links into the leaves (where a flow's downlink queue or a host's
	// uplink backlog shows).
	HostPorts []lsPort `json:"host_ports,omitempty"`
	// Kernel TCP: the senders' retransmissions.
	TCP *tcpCounters `json:"tcp_counters,omitempty"`
	// The switch thread's CPU time over the run, its passes that moved
	// frames and its sleeps in ppoll(2) and between busy passes (Tick).
	SwitchCPUSeconds float64 `json:"switch_cpu_seconds"`
	SwitchBusyPasses uint64  `json:"switch_busy_passes"`
	SwitchSleeps     uint64  `json:"switch_sleeps"`
	// ProcessCPUSeconds is this process's CPU time over the run (every
	// thread: the stacks, their waiters, the switch).
	ProcessCPUSeconds float64 `json:"process_cpu_seconds,omitempty"`
}

type lsSummary struct {
	Transport      string  `json:"transport"`
	MedianFlowMbps float64 `json:"median_flow_mbps"`
	MinFlowMbps    float64 `json:"min_flow_mbps"`
	MedianFraction float64 `json:"median_fraction_of_link"`
	MinFraction    float64 `json:"min_fraction_of_link"`
}

type leafSpineOutput struct {
	LinkBps int64 `json:"link_bps"`
	MTU     int   `json:"mtu"`
	IW      int   `json:"iw,omitempty"` // NDP initial window, packets (leafSpineIW)
	// NDPSpin is how long the NDP stacks' waiters spin before they sleep
	// (--spin): "never", "default" (the stack's adaptive default) or a
	// duration.
	NDPSpin      string      `json:"ndp_spin,omitempty"`
	Leaves       int         `json:"leaves"`
	HostsPerLeaf int         `json:"hosts_per_leaf"`
	Spines       int         `json:"spines"`
	Degraded     string      `json:"degraded_link,omitempty"`
	Size         int64       `json:"size_bytes"`
	Summary      []lsSummary `json:"summary"`
	Runs         []lsRun     `json:"runs"`
	// Sim is a permutation on the same fabric in the simulator (internal/sim):
	// same leaves, spines, link rates, queues and 8 paths per connection, with
	// its own ECMP hash and a random derangement for the pairs.
	Sim   *lsSim `json:"sim,omitempty"`
	CPUs  int    `json:"cpus"`
	Setup string `json:"setup"`
}

type lsSim struct {
	MedianFraction float64 `json:"median_fraction_of_link"`
	MinFraction    float64 `json:"min_fraction_of_link"`
	UplinkTrimPct  float64 `json:"uplink_trim_pct"`
	PathsExcluded  uint64  `json:"paths_excluded"`
	Error          string  `json:"error,omitempty"`
}

// leafSpineSim runs the permutation on the simulator.
func leafSpineSim(o leafSpineOpts) *lsSim {
	cfg := sim.PermutationConfig{Size: o.size, Clos: sim.ClosConfig{Kind: sim.LeafSpine, ECMP: sim.ECMPPath, Leaves: 2, Spines: o.spines, HostsPerLeaf: o.perLeaf,
		Params: sim.Params{LinkRate: float64(o.rate), LinkDelay: 1000, Endpoint: ndp.Config{IW: o.iw, Paths: 8, RTO: o.rto, MTU: o.mtu},
			Fabric: fabric.Config{DataQueue: 8}, Seed: 1}}}
	if o.degrade > 0 {
		cfg.Clos.Changes = []sim.LinkChange{{Core: 1, Pod: 1, Rate: float64(o.rate) / float64(o.degrade)}}
	}
	r, err := sim.RunPermutation(cfg)
	if err != nil {
		return &lsSim{Error: err.Error()}
	}
	return &lsSim{MedianFraction: r.MedianFlowGbps * 1e9 / float64(o.rate), MinFraction: r.MinFlowGbps * 1e9 / float64(o.rate),
		UplinkTrimPct: r.UplinkTrimPct, PathsExcluded: r.PathsExcluded}
}

func runLeafSpine(args []string) error {
	o, err := parseLeafSpineFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, AF_XDP)")
	}
	fmt.Fprintln(os.Stderr, "ndpperf leafspine: building the leaf-spine testbed...")
	out, err := leafSpineTestbed(o)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(out)
	}
	printLeafSpine(out)
	return nil
}

func leafSpineTestbed(o leafSpineOpts) (leafSpineOutput, error) {
	out := leafSpineOutput{LinkBps: o.rate, MTU: o.mtu, IW: o.iw, Leaves: 2, HostsPerLeaf: o.perLeaf, Spines: o.spines, Size: o.size, CPUs: runtime.NumCPU(),
		NDPSpin: spinName(o.stackSpin())}
	cfg := softswitch.Config{Rate: o.rate, Spines: o.spines, HostQueue: o.hostQueue, Tick: o.switchTick}
	if o.degrade > 0 {
		r := o.rate / int64(o.degrade)
		cfg.LinkRates = []softswitch.LinkRate{{Leaf: 1, Spine: 1, Up: r, Down: r}}
		out.Degraded = fmt.Sprintf("leaf1-spine1 at %s b/s (1/%d)", formatRate(float64(r)), o.degrade)
	}
	out.Setup = fmt.Sprintf("MTU %d; 2 leaves x %d hosts, %d spines, every link %s b/s, emulated by one ndpswitch thread (8-packet NDP queues, 100-frame drop-tail for TCP, loop tick %v); host i sends to host i+%d; NDP embedded stacks (pull pacer at the link rate, 8 paths, IW %d, waiters spin: %s), kernel TCP cubic; receivers hash",
		o.mtu, o.perLeaf, o.spines, formatRate(float64(o.rate)), o.switchTick, o.perLeaf, o.iw, out.NDPSpin)
	tb, err := newTestbed()
	if err != nil {
		return out, err
	}
	defer tb.Close()
	star, err := softswitch.NewLeafSpine(tb, softswitch.LeafSpineConfig{Leaves: 2, HostsPerLeaf: o.perLeaf, MTU: o.mtu, Switch: cfg})
	if err != nil {
		return out, err
	}
	payload, sum := throughputPayload(o.size)
	stopProf, err := o.prof.start()
	if err != nil {
		return out, err
	}
	defer stopProf()
	for r := 1; r <= o.runs; r++ {
		nr, err := leafSpineRun(star, o, "ndp", r, payload, sum)
		if err != nil {
			return out, fmt.Errorf("ndp run %d: %w", r, err)
		}
		nr.Run = r
		out.Runs = append(out.Runs, nr)
		if o.tcp {
			tr, err := leafSpineRun(star, o, "tcp", r, payload, sum)
			if err != nil {
				return out, fmt.Errorf("tcp run %d: %w", r, err)
			}
			tr.Run = r
			out.Runs = append(out.Runs, tr)
		}
	}
	for _, t := range []string{"ndp", "tcp"} {
		var mbps []float64
		for _, r := range out.Runs {
			if r.Transport == t {
				for _, f := range r.Flows {
					mbps = append(mbps, f.Mbps)
				}
			}
		}
		if len(mbps) == 0 {
			continue
		}
		sort.Float64s(mbps)
		med := mbps[len(mbps)/2]
		out.Summary = append(out.Summary, lsSummary{Transport: t, MedianFlowMbps: med, MinFlowMbps: mbps[0],
			MedianFraction: med * 1e6 / float64(o.rate), MinFraction: mbps[0] * 1e6 / float64(o.rate)})
	}
	if err := stopProf(); err != nil {
		return out, err
	}
	out.Sim = leafSpineSim(o)
	return out, nil
}

// stackSpin is the NDP stacks' Spin: the testbed's 2 x perLeaf stacks share
// the process's CPUs (pickSpin).
func (o leafSpineOpts) stackSpin() time.Duration {
	return pickSpin(o.spin, o.spinFixed, 2*o.perLeaf, runtime.NumCPU())
}

// leafSpineRun runs one permutation with transport "ndp" (stacks opened for
// the run and closed after it) or "tcp".
func leafSpineRun(star *softswitch.Star, o leafSpineOpts, transport string, runNum int, payload []byte, sum [32]byte) (lsRun, error) {
	n := len(star.Hosts)
	run := lsRun{Transport: transport}
	deadline := time.Now().Add(throughputTimeout(o.size * int64(n)))
	var (
		stacks  []*sockapi.Stack
		listen  = make([]func() (io.ReadCloser, error), n)
		dial    = make([]func() (io.WriteCloser, error), n)
		tcpBase tcpCounters
	)
	defer func() {
		for _, s := range stacks {
			s.Close()
		}
	}()
	addr := func(i int) string { return star.Hosts[i].Link.Addr.Addr().String() }
	for i, h := range star.Hosts {
		dst := (i + o.perLeaf) % n
		switch transport {
		case "ndp":
			s, err := openStack(h.NS, h.Link.Name, sockapi.Config{LinkRate: o.rate, RTO: o.rto, IW: o.iw, Spin: o.stackSpin()})
			if err != nil {
				return run, err
			}
			stacks = append(stacks, s)
			l, err := s.Listen(9)
			if err != nil {
				return run, err
			}
			defer l.Close()
			l.SetDeadline(deadline)
			listen[i] = func() (io.ReadCloser, error) { return l.AcceptNDP() }
			dial[i] = func() (io.WriteCloser, error) {
				return s.Dial(context.Background(), addr(dst)+":9", sockapi.WithDialTimeout(5*time.Second))
			}
		default:
			var ln net.Listener
			if err := h.NS.Do(func() (err error) {
				ln, err = net.Listen("tcp4", addr(i)+":9913")
				return err
			}); err != nil {
				return run, err
			}
			defer ln.Close()
			listen[i] = func() (io.ReadCloser, error) { return ln.Accept() }
			dial[i] = func() (io.WriteCloser, error) {
				var c net.Conn
				err := h.NS.Do(func() (err error) {
					c, err = net.DialTimeout("tcp4", addr(dst)+":9913", 5*time.Second)
					return err
				})
				return c, err
			}
			c, err := readTCPCounters(h.NS)
			if err != nil {
				return run, err
			}
			tcpBase = tcpBase.add(c)
		}
	}
	before := star.Switch.Stats()
	stacksBase := make([]ndpCounters, len(stacks))
	for i, s := range stacks {
		stacksBase[i] = stackCounters(s)
	}
	got := make([]received, n)
	sendErr := make([]error, n)
	var wg sync.WaitGroup
	cpu0 := processCPU().total()
	start := time.Now()
	stopTimeline, err := lsTimeline(star.Switch, o.timeline, transport, runNum, start)
	if err != nil {
		return run, err
	}
	for i := range star.Hosts {
		wg.Add(2)
		go func() {
			defer wg.Done()
			c, err := listen[i]()
			if err != nil {
				got[i] = received{err: err}
				return
			}
			defer c.Close()
			if d, ok := c.(interface{ SetDeadline(time.Time) error }); ok {
				d.SetDeadline(deadline)
			}
			got[i] = readAndHash(c)
		}()
		go func() {
			defer wg.Done()
			sendErr[i] = leafSpineSend(dial[i], payload, deadline)
		}()
	}
	wg.Wait()
	if err := stopTimeline(); err != nil {
		return run, err
	}
	run.ProcessCPUSeconds = (processCPU().total() - cpu0).Seconds()
	if err := errors.Join(sendErr...); err != nil {
		return run, err
	}
	// Let the switch publish its counters (it does within a millisecond of going idle).
	time.Sleep(20 * time.Millisecond)
	d := star.Switch.Stats().Sub(before)
	for i := range star.Hosts {
		from := (i - o.perLeaf + n) % n
		r, err := finishRun(transport, start, got[i], o.size, sum)
		if err != nil {
			return run, fmt.Errorf("flow %d->%d: %w", from, i, err)
		}
		fl := lsFlow{From: from, To: i, Mbps: r.Mbps, Fraction: r.Mbps * 1e6 / float64(o.rate), Verified: r.Verified,
			FirstByteMs: float64(got[i].first.Sub(start).Microseconds()) / 1e3, Seconds: r.Seconds}
		if i < len(stacks) {
			fl.LateSlots = stackCounters(stacks[i]).sub(stacksBase[i]).LateSlots
		}
		run.Flows = append(run.Flows, fl)
	}
	for _, p := range d.Ports {
		if strings.Contains(p.Name, ">") {
			run.Links = append(run.Links, lsLink{Name: p.Name, Offered: p.NDP.Arrivals + p.OtherArrivals, Frames: p.TxFrames, Bytes: p.TxBytes, Trimmed: p.NDP.Trimmed, Drops: p.OtherDrops, LostMs: float64(p.LostNs) / 1e6})
			continue
		}
		hp := lsPort{Name: p.Name, NIC: p.NIC, Offered: p.NDP.Arrivals + p.OtherArrivals, Frames: p.TxFrames, Trimmed: p.NDP.Trimmed,
			Drops: p.NDP.Dropped + p.OtherDrops, MaxData: p.NDP.MaxDataDepth, MaxOther: p.OtherMaxDepth, LostMs: float64(p.LostNs) / 1e6}
		if p.NDP.Arrivals > 0 {
			hp.MeanAhead = float64(p.NDPDataAhead) / float64(p.NDP.Arrivals)
		}
		run.HostPorts = append(run.HostPorts, hp)
	}
	run.SwitchCPUSeconds, run.SwitchBusyPasses, run.SwitchSleeps = d.CPUSeconds, d.BusyPasses, d.Sleeps+d.Ticks
	var total ndpCounters
	for i, s := range stacks {
		total = total.add(stackCounters(s).sub(stacksBase[i]))
	}
	if len(stacks) > 0 {
		run.PathsExcluded, run.NacksIn, run.Retransmits = total.PathsExcluded, total.NacksIn, total.Retransmits
		run.Stacks = &total
	}
	if transport == "tcp" {
		var after tcpCounters
		for _, h := range star.Hosts {
			c, err := readTCPCounters(h.NS)
			if err != nil {
				return run, err
			}
			after = after.add(c)
		}
		tc := after.sub(tcpBase)
		run.TCP = &tc
	}
	return run, nil
}

// lsTimeline samples sw's host ports (the leaves' ports toward the hosts
// and the hosts' NIC links) every millisecond until the returned function is
// called, which appends the samples to the CSV file path (nothing when path
// is empty). A flow's downlink use and its sender's NIC backlog (offered less
// sent) over time show where its link time went. The switch publishes its
// counters about every millisecond while busy.
func lsTimeline(sw *softswitch.Switch, path, transport string, run int, start time.Time) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if fi, err := f.Stat(); err == nil && fi.Size() == 0 {
		b.WriteString("transport,run,us,port,nic,offered,frames,bytes,ndp_trimmed\n")
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			st := sw.Stats()
			us := time.Since(start).Microseconds()
			for _, p := range st.Ports {
				if strings.Contains(p.Name, ">") { // a leaf-spine link
					continue
				}
				fmt.Fprintf(&b, "%s,%d,%d,%s,%v,%d,%d,%d,%d\n", transport, run, us, p.Name, p.NIC,
					p.OtherArrivals+p.NDP.Arrivals, p.TxFrames, p.TxBytes, p.NDP.Trimmed)
			}
		}
	}()
	return func() error {
		close(quit)
		<-done
		_, werr := f.WriteString(b.String())
		return errors.Join(werr, f.Close())
	}, nil
}

// leafSpineSend dials, writes payload, half-closes and waits for the
// receiver's close.
func leafSpineSend(dial func() (io.WriteCloser, error), payload []byte, deadline time.Time) error {
	c, err := dial()
	if err != nil {
		return err
	}
	defer c.Close()
	type deadliner interface{ SetDeadline(time.Time) error }
	if d, ok := c.(deadliner); ok {
		d.SetDeadline(deadline)
	}
	if _, err := c.Write(payload); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		return errors.New("connection cannot half-close")
	}
	if err := cw.CloseWrite(); err != nil {
		return err
	}
	if r, ok := c.(io.Reader); ok {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return fmt.Errorf("reading the receiver's close: %w", err)
		}
	}
	return nil
}

func printLeafSpine(out leafSpineOutput) {
	fmt.Printf("Permutation across a leaf-spine fabric: %s\n", out.Setup)
	if out.Degraded != "" {
		fmt.Printf("degraded: %s\n", out.Degraded)
	}
	for _, r := range out.Runs {
		fmt.Printf("%s run %d: flows", r.Transport, r.Run)
		for _, f := range r.Flows {
			fmt.Printf("  %d->%d %.0f Mb/s (%.2f, first byte %.1f ms)", f.From, f.To, f.Mbps, f.Fraction, f.FirstByteMs)
		}
		fmt.Println()
		fmt.Printf("  spine links (offered/frames/bytes/trimmed/tcp drops/lost ms):")
		for _, l := range r.Links {
			fmt.Printf("  %s %d/%d/%d/%d/%d/%.1f", l.Name, l.Offered, l.Frames, l.Bytes, l.Trimmed, l.Drops, l.LostMs)
		}
		fmt.Printf("\n  switch CPU %.2f s, process CPU %.2f s\n", r.SwitchCPUSeconds, r.ProcessCPUSeconds)
		for _, p := range r.HostPorts {
			fmt.Printf("  %s: offered %d, frames %d, trimmed %d, drops %d, max data %d, max other %d, mean data ahead %.2f, link time lost %.1f ms\n",
				p.Name, p.Offered, p.Frames, p.Trimmed, p.Drops, p.MaxData, p.MaxOther, p.MeanAhead, p.LostMs)
		}
		if r.Transport == "ndp" {
			fmt.Printf("  paths excluded %d, nacks %d, retransmits %d\n", r.PathsExcluded, r.NacksIn, r.Retransmits)
			if r.Stacks != nil {
				r.Stacks.print(os.Stdout, "stacks")
			}
		} else if r.TCP != nil {
			fmt.Printf("  retransmitted segments %d, timeouts %d\n", r.TCP.RetransSegs, r.TCP.Timeouts)
		}
	}
	fmt.Printf("%-6s %16s %12s %16s %13s\n", "", "median_flow_Mb/s", "min_Mb/s", "median_fraction", "min_fraction")
	for _, s := range out.Summary {
		fmt.Printf("%-6s %16.1f %12.1f %16.3f %13.3f\n", s.Transport, s.MedianFlowMbps, s.MinFlowMbps, s.MedianFraction, s.MinFraction)
	}
	if s := out.Sim; s != nil {
		if s.Error != "" {
			fmt.Printf("sim: %s\n", s.Error)
		} else {
			fmt.Printf("%-6s %16s %12s %16.3f %13.3f   (uplink trims %.2f%%, paths excluded %d)\n", "sim", "", "", s.MedianFraction, s.MinFraction, s.UplinkTrimPct, s.PathsExcluded)
		}
	}
}

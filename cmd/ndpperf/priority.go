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
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ndpstack/ndpstack/internal/sim"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
	"github.com/ndpstack/ndpstack/sockapi"
)

// priority: the receiver's pull scheduling made visible. K senders each
// send one flow of --size bytes to one receiver at the same moment. The
// receiver's pull pacer runs at --rate (1 Gb/s by default, below what the
// stacks manage on veth), so the pacer, not the CPU, decides who gets the
// downlink. Flow 0 is the favoured one; the same round runs under each
// policy, on three receiver stacks (one namespace each, all on the bridge):
//
//	fair      no hints: every flow gets 1/K of the pulls, all end together
//	priority  flow 0 dials WithPriority(1) (PolicyPriority): strict priority,
//	          flow 0 takes every pull while it has any and ends first
//	deadline  flow 0 dials WithSize and WithDeadline at --deadline (0.9) x
//	          the time the fair share would need (PolicyDeadline): D3 gives
//	          it its desired rate plus a fair share of what is left, so it
//	          ends before its deadline and before the others
//
// The policies take turns round by round. Each flow's completion time runs
// from the common start to the receiver's EOF, with the bytes checked
// (SHA-256). Last, a flow whose deadline needs four times the link is
// dialled to the deadline receiver: D3 quenches it on its first packet
// and the sender gets ErrDeadlineUnmeetable within a round trip.
//
// With --fabric switch every host is on ndpswitch at --link (the pull rate
// too unless --rate is given) instead of the bridge, and a fourth row takes
// its turn: the same K flows over kernel TCP into a receiver of their own
// through the same switch and buffers. Every row counts the rounds in which
// flow 0 met the deadline the deadline policy gives it (D3 against a fair
// share and against kernel TCP), with the switch's counters over the row's
// rounds; the same flows in ndpsim at the same rate are printed beside.
//
// Not root: the same flows run on the simulator and it says so.

func init() {
	register(&subcommand{
		name:    "priority",
		summary: "K flows into one receiver paced at --rate: completion per flow under fair, strict priority and D3 deadline pull scheduling (root; simulator otherwise)",
		run:     runPriority,
	})
}

type priorityOpts struct {
	senders int
	size    int64
	rate    int64
	rounds  int
	// deadline is flow 0's D3 deadline in the deadline policy, as a
	// fraction of fairTime (below 1: a fair share would miss it).
	deadline float64
	poll     string // receivers' polling: adaptive or busy
	pcap     string // directory for one pcapng capture per NDP stack ("": none)
	json     bool
	fabricFlags
}

func parsePriorityFlags(args []string) (priorityOpts, error) {
	fs := flag.NewFlagSet("priority", flag.ContinueOnError)
	senders := fs.Int("senders", 2, "senders, one flow each, all at once (2..8); flow 0 is the favoured one")
	size := byteSize(2e6)
	fs.Var(&size, "size", "bytes per flow (e.g. 2MB; at most 256MiB)")
	rate := bitRate(200e6)
	fs.Var(&rate, "rate", "receivers' pull pacer rate (bits/s): low enough that the pacer, not the CPU, is the bottleneck")
	deadline := fs.Float64("deadline", 0.9, "flow 0's D3 deadline in the deadline policy, as a fraction of the time all flows take at a fair share (0.1..10)")
	rounds := fs.Int("rounds", 5, "rounds per policy, taking turns")
	poll := fs.String("poll", "adaptive", "receivers' waiting: adaptive (spin, then sleep) or busy (spin until done)")
	asJSON := fs.Bool("json", false, "print JSON")
	pcap := fs.String("pcap", "", "write each NDP stack's frames to DIR/priority-senderN.pcapng and DIR/priority-POLICY.pcapng (the receivers; 64 MiB each at most)")
	fab := registerFabricFlags(fs, "bridge", "a Linux bridge, no queue to speak of")
	if err := fs.Parse(args); err != nil {
		return priorityOpts{}, err
	}
	if fs.NArg() > 0 {
		return priorityOpts{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := priorityOpts{senders: *senders, size: int64(size), rate: int64(rate), rounds: *rounds, deadline: *deadline, poll: *poll, pcap: *pcap, json: *asJSON}
	var err error
	if o.fabricFlags, err = fab.parse(fs, &o.rate); err != nil {
		return priorityOpts{}, err
	}
	return o, o.validate()
}

func (o priorityOpts) validate() error {
	switch {
	case o.senders < 2 || o.senders > 8:
		return fmt.Errorf("--senders %d: want 2..8", o.senders)
	case o.size < 64<<10 || o.size > 256<<20:
		return fmt.Errorf("--size %d: want 64KiB..256MiB (more than the first-RTT window, so pulls decide)", o.size)
	case o.rate < 1e6:
		return fmt.Errorf("--rate %d: want at least 1M", o.rate)
	case o.rounds < 1 || o.rounds > 1000:
		return fmt.Errorf("--rounds %d: want 1..1000", o.rounds)
	case !(o.deadline >= 0.1 && o.deadline <= 10):
		return fmt.Errorf("--deadline %v: want 0.1..10", o.deadline)
	case o.poll != "adaptive" && o.poll != "busy":
		return fmt.Errorf("--poll %q: want adaptive or busy", o.poll)
	}
	return o.fabricFlags.validate()
}

// fairTime is how long K flows of size need at rate: when every flow of a
// fair round ends.
func (o priorityOpts) fairTime() time.Duration {
	return time.Duration(float64(o.senders) * float64(o.size) * 8 / float64(o.rate) * 1e9)
}

// d3Deadline is flow 0's deadline hint, from the round's start.
func (o priorityOpts) d3Deadline() time.Duration {
	return time.Duration(float64(o.fairTime()) * o.deadline)
}

var priorityPolicies = []struct {
	name   string
	policy sockapi.Policy
}{{"fair", sockapi.PolicyFair}, {"priority", sockapi.PolicyPriority}, {"deadline", sockapi.PolicyDeadline}}

// flowOpts are flow i's dial options under policy, for a round starting at t0.
func (o priorityOpts) flowOpts(policy string, i int, t0 time.Time) []sockapi.DialOption {
	if i != 0 {
		return nil
	}
	switch policy {
	case "priority":
		return []sockapi.DialOption{sockapi.WithPriority(1)}
	case "deadline":
		return []sockapi.DialOption{sockapi.WithSize(o.size), sockapi.WithDeadline(t0.Add(o.d3Deadline()))}
	}
	return nil
}

type priorityFlow struct {
	Flow int    `json:"flow"`
	Hint string `json:"hint"`
	// MedianMs, MinMs and MaxMs are over the rounds the flow completed
	// (0 when it completed none); Ms is each completed round's time.
	MedianMs float64   `json:"median_ms"`
	MinMs    float64   `json:"min_ms"`
	MaxMs    float64   `json:"max_ms"`
	Ms       []float64 `json:"ms"`
	// Quenched counts rounds in which D3 failed the flow with
	// ErrDeadlineUnmeetable: it did not complete. QuenchedAtMs is when its
	// sender got the error and QuenchedBytes what its receiver had read by
	// then (-1: the receiver never saw the connection), each quenched round.
	Quenched      int       `json:"quenched_rounds"`
	QuenchedAtMs  []float64 `json:"quenched_at_ms,omitempty"`
	QuenchedBytes []int64   `json:"quenched_received_bytes,omitempty"`
}

type priorityPolicy struct {
	Policy string         `json:"policy"`
	Flows  []priorityFlow `json:"flows"`
	// Flow0First counts rounds in which flow 0 finished before every other flow.
	Flow0First int `json:"flow0_first_rounds"`
	// Flow0DeadlineMet counts rounds in which flow 0 completed by the
	// deadline the deadline policy gives it (flow0_deadline_ms), hinted or not.
	Flow0DeadlineMet int `json:"flow0_deadline_met_rounds"`
	// MedianRoundMs is the median of the rounds' last completion; GoodputMbps
	// is K x size x 8 over it (near --rate when the pacer is the bottleneck).
	MedianRoundMs float64 `json:"median_round_ms"`
	GoodputMbps   float64 `json:"goodput_mbps"`
	// Receiver is the receiver stack's counters over its rounds.
	Receiver *ndpCounters `json:"receiver_counters,omitempty"`
	// --fabric switch: the switch over the row's rounds; the tcp row: the
	// senders' kernel TCP counters over its rounds.
	Switch *switchCounters `json:"switch,omitempty"`
	TCP    *tcpCounters    `json:"tcp,omitempty"`
}

type unmeetableResult struct {
	NeededMbps  float64 `json:"needed_mbps"` // size x 8 / deadline
	DeadlineMs  float64 `json:"deadline_ms"`
	FailedAfter float64 `json:"failed_after_ms"` // from Dial to the sender's error
	SenderErr   string  `json:"sender_error"`
	Unmeetable  bool    `json:"err_deadline_unmeetable"` // errors.Is(err, ErrDeadlineUnmeetable)
	ReceiverErr string  `json:"receiver_error,omitempty"`
	Quenched    uint64  `json:"receiver_quenched"`
}

type priorityOutput struct {
	Senders    int              `json:"senders"`
	Size       int64            `json:"size_bytes"`
	RateBps    int64            `json:"pull_rate_bps"`
	Rounds     int              `json:"rounds"`
	FairMs     float64          `json:"fair_share_ms"`     // K x size x 8 / rate
	DeadlineMs float64          `json:"flow0_deadline_ms"` // flow 0's D3 deadline in the deadline policy
	Policies   []priorityPolicy `json:"policies"`
	Unmeetable unmeetableResult `json:"unmeetable"`
	// --fabric switch: "switch" and the port rate, and the same flows in
	// ndpsim at the same rate (one round per policy).
	Fabric  string          `json:"fabric"`
	LinkBps int64           `json:"link_bps,omitempty"`
	Sim     *priorityOutput `json:"sim,omitempty"`
	CPUs    int             `json:"cpus"`
	Setup   string          `json:"setup"`
}

func runPriority(args []string) error {
	o, err := parsePriorityFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return prioritySim(o)
	}
	fmt.Fprintf(os.Stderr, "ndpperf priority: building a testbed (%d senders, 3 receivers, a bridge)...\n", o.senders)
	out, err := priorityTestbed(o)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "ndpperf priority: testbed removed.")
	return printPriority(out, o.json)
}

func printPriority(out priorityOutput, asJSON bool) error {
	if asJSON {
		return printJSON(out)
	}
	fmt.Printf("%d flows of %d bytes into one receiver, pull pacer at %s b/s (%s)\n", out.Senders, out.Size, formatRate(float64(out.RateBps)), out.Setup)
	fmt.Printf("all flows at a fair share end after %.1f ms; flow 0's D3 deadline (deadline policy) is %.1f ms\n", out.FairMs, out.DeadlineMs)
	fmt.Printf("completion times are over the rounds a flow completed; a quenched flow did not complete\n")
	fmt.Printf("%-9s %4s %-22s %10s %8s %8s %9s\n", "policy", "flow", "hint", "median_ms", "min_ms", "max_ms", "quenched")
	for _, p := range out.Policies {
		for _, f := range p.Flows {
			fmt.Printf("%-9s %4d %-22s %10.1f %8.1f %8.1f %5d/%-3d\n", p.Policy, f.Flow, f.Hint, f.MedianMs, f.MinMs, f.MaxMs, f.Quenched, f.Quenched+len(f.Ms))
			for k, at := range f.QuenchedAtMs {
				fmt.Printf("%-9s %4d quenched at %.1f ms, the receiver had read %d of %d bytes\n", "", f.Flow, at, f.QuenchedBytes[k], out.Size)
			}
		}
	}
	fmt.Printf("%-9s %12s %14s %14s %13s\n", "policy", "flow0_first", "flow0_met_dl", "median_round", "goodput_Mb/s")
	for _, p := range out.Policies {
		fmt.Printf("%-9s %8d/%-3d %10d/%-3d %11.1f ms %13.0f\n", p.Policy, p.Flow0First, out.Rounds, p.Flow0DeadlineMet, out.Rounds, p.MedianRoundMs, p.GoodputMbps)
	}
	if out.Sim != nil {
		fmt.Printf("ndpsim, the same flows at %s b/s (one round):\n", formatRate(float64(out.Sim.RateBps)))
		for _, p := range out.Sim.Policies {
			fmt.Printf("  %-9s flow 0 %8.1f ms (deadline met %d/1), round %8.1f ms\n", p.Policy, p.Flows[0].MedianMs, p.Flow0DeadlineMet, p.MedianRoundMs)
		}
	}
	u := out.Unmeetable
	fmt.Printf("unmeetable deadline (%.0f Mb/s needed, deadline %.2f ms): sender failed after %.3f ms with %q (ErrDeadlineUnmeetable: %v); receiver quenched %d",
		u.NeededMbps, u.DeadlineMs, u.FailedAfter, u.SenderErr, u.Unmeetable, u.Quenched)
	if u.ReceiverErr != "" {
		fmt.Printf("; receiver's read: %q", u.ReceiverErr)
	}
	fmt.Println()
	for _, p := range out.Policies {
		if p.Receiver != nil {
			fmt.Printf("%s receiver counters:\n", p.Policy)
			p.Receiver.print(os.Stdout, "receiver")
		}
		if p.TCP != nil {
			fmt.Printf("%s senders: retransmitted segments %d, RTO fires %d, fast retransmits %d\n", p.Policy, p.TCP.RetransSegs, p.TCP.Timeouts, p.TCP.FastRetrans)
		}
		if p.Switch != nil {
			fmt.Printf("%s ", p.Policy)
			p.Switch.print(os.Stdout)
		}
	}
	return nil
}

func hintName(policy string, i int, o priorityOpts) string {
	if i != 0 {
		return "none"
	}
	switch policy {
	case "priority":
		return "WithPriority(1)"
	case "deadline":
		return fmt.Sprintf("deadline %.1fms", float64(o.d3Deadline().Microseconds())/1000)
	case "tcp":
		return "kernel TCP, no hint"
	}
	return "none"
}

// flowOutcome is one flow's completion in one round: the time from the
// round's start to the receiver's EOF, or to the sender's
// ErrDeadlineUnmeetable when D3 quenched it.
type flowOutcome struct {
	d        time.Duration
	quenched bool
	got      int64 // quenched: bytes the receiver read (-1: not seen)
}

// summarizePriority turns per-round outcomes (times[round][flow]) into a
// policy's row.
func summarizePriority(name string, o priorityOpts, times [][]flowOutcome) priorityPolicy {
	p := priorityPolicy{Policy: name}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var rounds []time.Duration
	for _, r := range times {
		first, last := !r[0].quenched, time.Duration(0)
		for i, f := range r {
			last = max(last, f.d)
			if i > 0 && f.d <= r[0].d && !f.quenched {
				first = false
			}
		}
		if first {
			p.Flow0First++
		}
		if !r[0].quenched && r[0].d <= o.d3Deadline() {
			p.Flow0DeadlineMet++
		}
		rounds = append(rounds, last)
	}
	for i := 0; i < o.senders; i++ {
		f := priorityFlow{Flow: i, Hint: hintName(name, i, o), Ms: []float64{}}
		for _, r := range times {
			if r[i].quenched {
				f.Quenched++
				f.QuenchedAtMs = append(f.QuenchedAtMs, ms(r[i].d))
				f.QuenchedBytes = append(f.QuenchedBytes, r[i].got)
				continue
			}
			f.Ms = append(f.Ms, ms(r[i].d))
		}
		if v := slices.Sorted(slices.Values(f.Ms)); len(v) > 0 {
			f.MedianMs, f.MinMs, f.MaxMs = v[len(v)/2], v[0], v[len(v)-1]
		}
		p.Flows = append(p.Flows, f)
	}
	sort.Slice(rounds, func(i, j int) bool { return rounds[i] < rounds[j] })
	med := rounds[len(rounds)/2]
	p.MedianRoundMs = ms(med)
	p.GoodputMbps = float64(o.senders) * float64(o.size) * 8 / med.Seconds() / 1e6
	return p
}

const priorityPort = 11

func priorityTestbed(o priorityOpts) (priorityOutput, error) {
	if err := o.validate(); err != nil {
		return priorityOutput{}, err
	}
	out := priorityOutput{Senders: o.senders, Size: o.size, RateBps: o.rate, Rounds: o.rounds, CPUs: runtime.NumCPU(),
		FairMs: float64(o.fairTime().Microseconds()) / 1000, DeadlineMs: float64(o.d3Deadline().Microseconds()) / 1000,
		Setup: fmt.Sprintf("sender namespaces and one receiver namespace per policy on a Linux bridge, embedded stacks, receivers %s polling", o.poll)}
	tb, err := newTestbed()
	if err != nil {
		return out, err
	}
	defer tb.Close()
	// Hosts: the senders, one receiver per policy, and (switch) kernel TCP's receiver.
	nhosts := o.senders + len(priorityPolicies)
	if o.on() {
		nhosts++
	}
	hosts, sw, err := o.hosts(tb, nhosts, 0, "10.205.0")
	if err != nil {
		return out, err
	}
	out.Fabric = "bridge"
	if sw != nil {
		out.Fabric, out.LinkBps = "switch", o.link
		out.Setup = fmt.Sprintf("sender namespaces, one receiver namespace per policy and one for kernel TCP on %s, embedded stacks (RTO %v), receivers %s polling; kernel TCP (the namespaces' default congestion control) takes its turn after the NDP policies each round",
			o.setup(sw), o.rto(), o.poll)
	}
	var stacks []*sockapi.Stack
	defer func() {
		for _, s := range stacks {
			s.Close()
		}
	}()
	// host opens a stack on host i.
	host := func(i int, name string, cfg sockapi.Config) (*sockapi.Stack, netip.Addr, error) {
		if o.pcap != "" {
			cfg.CaptureFile = filepath.Join(o.pcap, "priority-"+name+".pcapng")
		}
		cfg.CommodityTrim, cfg.RTO, cfg.IW, cfg.PullBatch = o.commodityTrim(), o.rto(), o.iw(), o.pullBatch
		s, err := openStack(hosts[i].ns, hosts[i].link.Name, cfg)
		if err != nil {
			return nil, netip.Addr{}, err
		}
		stacks = append(stacks, s)
		return s, hosts[i].link.Addr.Addr(), nil
	}
	senders := make([]*sockapi.Stack, o.senders)
	senderIdx := map[netip.Addr]int{}
	for i := range senders {
		s, ip, err := host(i, fmt.Sprintf("sender%d", i), sockapi.Config{})
		if err != nil {
			return out, err
		}
		senders[i], senderIdx[ip] = s, i
	}
	type receiver struct {
		s      *sockapi.Stack
		l      *sockapi.Listener
		addr   sockapi.Addr
		before ndpCounters
	}
	recv := make([]receiver, len(priorityPolicies))
	for i, p := range priorityPolicies {
		cfg := sockapi.Config{LinkRate: o.rate, Policy: p.policy}
		if o.poll == "busy" {
			cfg.PollMode = sockapi.PollBusy
		}
		s, ip, err := host(o.senders+i, p.name, cfg)
		if err != nil {
			return out, err
		}
		l, err := s.Listen(priorityPort)
		if err != nil {
			return out, err
		}
		recv[i] = receiver{s: s, l: l, addr: sockapi.Addr{IP: ip, Port: priorityPort}}
	}
	payload, sum := throughputPayload(o.size)
	timeout := 30*time.Second + 4*o.fairTime()

	// round runs one round into receiver r under policy: every sender at once.
	round := func(r receiver, policy string) ([]flowOutcome, error) {
		type result struct {
			flow int
			got  received
		}
		results := make(chan result, o.senders)
		acceptDone := make(chan error, 1)
		r.l.SetDeadline(time.Now().Add(timeout))
		go func() {
			for n := 0; n < o.senders; n++ {
				c, err := r.l.AcceptNDP()
				if err != nil {
					acceptDone <- err
					return
				}
				flow, ok := senderIdx[c.RemoteAddr().(sockapi.Addr).IP]
				if !ok {
					c.Abort()
					acceptDone <- fmt.Errorf("connection from an unknown address %v", c.RemoteAddr())
					return
				}
				c.SetDeadline(time.Now().Add(timeout))
				go func() {
					defer c.Close()
					results <- result{flow, readAndHash(c)}
				}()
			}
			acceptDone <- nil
		}()
		start := make(chan struct{})
		sendErrs := make([]error, o.senders)
		sendEnd := make([]time.Time, o.senders)
		var sends sync.WaitGroup
		t0 := time.Now().Add(time.Millisecond) // every sender is waiting on start by then
		for i := range senders {
			sends.Add(1)
			go func() {
				defer sends.Done()
				<-start // t0 is final: written before start was closed
				opts := append(o.flowOpts(policy, i, t0), sockapi.WithDialTimeout(5*time.Second))
				sendErrs[i] = sendFlow(senders[i], r.addr, payload, timeout, opts)
				sendEnd[i] = time.Now()
			}()
		}
		time.Sleep(time.Until(t0))
		t0 = time.Now()
		close(start)
		sends.Wait()
		out := make([]flowOutcome, o.senders)
		var errs []error
		want := 0 // flows the receiver must deliver whole
		for i, err := range sendErrs {
			switch {
			case err == nil:
				want++
			case errors.Is(err, sockapi.ErrDeadlineUnmeetable) && policy == "deadline":
				// D3 quenched the flow: a result, not a failure of the benchmark.
				out[i] = flowOutcome{d: sendEnd[i].Sub(t0), quenched: true, got: -1}
			default:
				errs = append(errs, fmt.Errorf("sender %d: %w", i, err))
			}
		}
		stopAccept := func() error {
			r.l.SetDeadline(time.Unix(1, 0))
			err := <-acceptDone
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = nil
			}
			return err
		}
		if err := errors.Join(errs...); err != nil {
			return nil, errors.Join(err, stopAccept())
		}
		quenched := len(senders) - want
		for got := 0; got < want; {
			res := <-results // every sender finished: the receiver has read to EOF
			if out[res.flow].quenched {
				// the quenched connection's reader failing, as it should
				out[res.flow].got = res.got.n
				quenched--
				continue
			}
			if res.got.err != nil {
				return nil, errors.Join(fmt.Errorf("flow %d: receiver after %d bytes: %w", res.flow, res.got.n, res.got.err), stopAccept())
			}
			if res.got.n != o.size || res.got.sum != sum {
				return nil, errors.Join(fmt.Errorf("flow %d: received %d of %d bytes, SHA-256 match %v", res.flow, res.got.n, o.size, res.got.sum == sum), stopAccept())
			}
			out[res.flow] = flowOutcome{d: res.got.end.Sub(t0)}
			got++
		}
		// A quenched connection that was accepted fails its reader at once
		// (RESET); one quenched on its first packet may never have been.
		for wait := time.After(200 * time.Millisecond); quenched > 0; quenched-- {
			select {
			case res := <-results:
				out[res.flow].got = res.got.n
			case <-wait:
				quenched = 0
			}
		}
		return out, stopAccept()
	}

	// rows are the NDP policies and (switch) kernel TCP, each with its round.
	type row struct {
		name  string
		round func() ([]flowOutcome, error)
		times [][]flowOutcome
		sw    *switchCounters
		tcp   tcpCounters
	}
	var rows []*row
	for i, p := range priorityPolicies {
		rows = append(rows, &row{name: p.name, round: func() ([]flowOutcome, error) { return round(recv[i], p.name) }})
	}
	var tcpRow *row
	if o.on() {
		senderNS := make([]*testbed.Namespace, o.senders)
		for i := range senderNS {
			senderNS[i] = hosts[i].ns
		}
		rcv := hosts[nhosts-1]
		tcpRow = &row{name: "tcp", round: func() ([]flowOutcome, error) {
			return priorityTCPRound(senderNS, senderIdx, rcv, o, payload, sum, timeout)
		}}
		rows = append(rows, tcpRow)
	}
	// One unmeasured round per row: ARP, first connections.
	for i, r := range rows {
		if _, err := r.round(); err != nil {
			return out, fmt.Errorf("%s warm-up: %w", r.name, err)
		}
		if i < len(recv) {
			recv[i].before = stackCounters(recv[i].s)
		}
	}
	for n := 0; n < o.rounds; n++ {
		for _, r := range rows {
			swBefore := switchStats(sw)
			var tcpBefore tcpCounters
			if r == tcpRow {
				if tcpBefore, err = sumTCPCounters(hosts[:o.senders]); err != nil {
					return out, err
				}
			}
			t, err := r.round()
			if err != nil {
				return out, fmt.Errorf("%s round %d: %w", r.name, n+1, err)
			}
			r.times = append(r.times, t)
			if sw != nil {
				d := newSwitchCounters(sw.Stats().Sub(swBefore), o.senders+indexOf(rows, r))
				if r.sw == nil {
					r.sw = d
				} else {
					r.sw.add(d)
				}
			}
			if r == tcpRow {
				after, err := sumTCPCounters(hosts[:o.senders])
				if err != nil {
					return out, err
				}
				r.tcp = r.tcp.add(after.sub(tcpBefore))
			}
		}
	}
	for i, r := range rows {
		p := summarizePriority(r.name, o, r.times)
		if i < len(recv) {
			c := stackCounters(recv[i].s).sub(recv[i].before)
			p.Receiver = &c
		}
		p.Switch = r.sw
		if r == tcpRow {
			tc := r.tcp
			p.TCP = &tc
		}
		out.Policies = append(out.Policies, p)
	}
	dl := recv[len(recv)-1]
	out.Unmeetable = unmeetable(senders[0], dl.s, dl.l, dl.addr, o)
	if o.on() {
		sim, err := prioritySimRun(o)
		if err != nil {
			return out, fmt.Errorf("ndpsim: %w", err)
		}
		out.Sim = &sim
	}
	return out, nil
}

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// sumTCPCounters is the kernel TCP counters of hosts' namespaces, summed.
func sumTCPCounters(hosts []fabricHost) (tcpCounters, error) {
	var sum tcpCounters
	for _, h := range hosts {
		c, err := readTCPCounters(h.ns)
		if err != nil {
			return sum, err
		}
		sum = sum.add(c)
	}
	return sum, nil
}

const priorityTCPPort = 9913

// priorityTCPRound is one round of the K flows over kernel TCP: every sender
// namespace dials rcv at once, writes payload and closes its side; a flow's
// time runs from the common start to the receiver's EOF, its bytes checked.
func priorityTCPRound(senders []*testbed.Namespace, senderIdx map[netip.Addr]int, rcv fabricHost, o priorityOpts, payload []byte, sum [32]byte, timeout time.Duration) ([]flowOutcome, error) {
	addr := netip.AddrPortFrom(rcv.link.Addr.Addr(), priorityTCPPort).String()
	var ln net.Listener
	if err := rcv.ns.Do(func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		return nil, err
	}
	defer ln.Close()
	deadline := time.Now().Add(timeout)
	ln.(*net.TCPListener).SetDeadline(deadline)
	type result struct {
		flow int
		got  received
	}
	results := make(chan result, len(senders))
	acceptErr := make(chan error, 1)
	go func() {
		for range senders {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			flow, ok := senderIdx[ap.Addr()]
			if !ok {
				c.Close()
				acceptErr <- fmt.Errorf("connection from an unknown address %v", c.RemoteAddr())
				return
			}
			c.SetDeadline(deadline)
			go func() {
				defer c.Close()
				results <- result{flow, readAndHash(c)}
			}()
		}
		acceptErr <- nil
	}()
	start := make(chan struct{})
	sendErrs := make([]error, len(senders))
	var sends sync.WaitGroup
	for i, ns := range senders {
		sends.Add(1)
		go func() {
			defer sends.Done()
			var c net.Conn
			<-start
			if err := ns.Do(func() (err error) {
				c, err = net.DialTimeout("tcp4", addr, 5*time.Second)
				return err
			}); err != nil {
				sendErrs[i] = err
				return
			}
			defer c.Close()
			c.SetDeadline(deadline)
			if _, err := c.Write(payload); err != nil {
				sendErrs[i] = err
				return
			}
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				sendErrs[i] = err
				return
			}
			_, sendErrs[i] = io.Copy(io.Discard, c)
		}()
	}
	t0 := time.Now()
	close(start)
	sends.Wait()
	if err := errors.Join(sendErrs...); err != nil {
		return nil, err
	}
	out := make([]flowOutcome, len(senders))
	for range senders {
		res := <-results // every sender saw the receiver's close: its reader is done
		if res.got.err != nil || res.got.n != o.size || res.got.sum != sum {
			return nil, fmt.Errorf("tcp flow %d: received %d of %d bytes, SHA-256 match %v, error %v", res.flow, res.got.n, o.size, res.got.sum == sum, res.got.err)
		}
		out[res.flow] = flowOutcome{d: res.got.end.Sub(t0)}
	}
	return out, <-acceptErr
}

// sendFlow dials to, writes payload, closes its side and waits for the
// receiver's close.
func sendFlow(s *sockapi.Stack, to sockapi.Addr, payload []byte, timeout time.Duration, opts []sockapi.DialOption) error {
	c, err := s.DialAddr(context.Background(), to, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(payload); err != nil {
		return err
	}
	if err := c.CloseWrite(); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, c)
	return err
}

// unmeetable dials a flow whose deadline needs four times the pull rate to
// the deadline receiver and reports how fast and how it failed.
func unmeetable(snd, rcv *sockapi.Stack, l *sockapi.Listener, to sockapi.Addr, o priorityOpts) unmeetableResult {
	dl := time.Duration(float64(o.size) * 8 / float64(4*o.rate) * 1e9)
	res := unmeetableResult{NeededMbps: float64(o.size) * 8 / dl.Seconds() / 1e6, DeadlineMs: float64(dl.Microseconds()) / 1000}
	before := stackCounters(rcv)
	recvErr := make(chan error, 1)
	go func() {
		l.SetDeadline(time.Now().Add(5 * time.Second))
		c, err := l.AcceptNDP()
		if err != nil {
			recvErr <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, c)
		recvErr <- err
	}()
	start := time.Now()
	payload := make([]byte, o.size)
	err := sendFlow(snd, to, payload, 5*time.Second, []sockapi.DialOption{sockapi.WithSize(o.size), sockapi.WithDeadline(start.Add(dl))})
	res.FailedAfter = float64(time.Since(start).Microseconds()) / 1000
	if err == nil {
		res.SenderErr = "none: the flow completed"
	} else {
		res.SenderErr = err.Error()
	}
	res.Unmeetable = errors.Is(err, sockapi.ErrDeadlineUnmeetable)
	// The quenched connection may or may not have reached the accept queue
	// before the reset; give it a moment, then stop waiting.
	select {
	case err := <-recvErr:
		if err != nil {
			res.ReceiverErr = err.Error()
		}
	case <-time.After(200 * time.Millisecond):
		l.SetDeadline(time.Unix(1, 0))
		if err := <-recvErr; err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			res.ReceiverErr = err.Error()
		}
	}
	res.Quenched = stackCounters(rcv).sub(before).Quenched
	return res
}

// prioritySim is the unprivileged fallback: the same flows, one round per
// policy, on the simulator (one NDP switch, links at --rate, 1 µs delay).
func prioritySim(o priorityOpts) error {
	fmt.Fprintln(os.Stderr, "ndpperf priority: not root, so no veth testbed (network namespaces and AF_XDP need root).")
	fmt.Fprintln(os.Stderr, "  Running the same flows on the simulator instead: real ndp endpoints and pull queues with each policy,")
	fmt.Fprintf(os.Stderr, "  %d senders and one receiver on one NDP switch (%s b/s links, 1 µs delay), virtual time, one round each.\n", o.senders, formatRate(float64(o.rate)))
	out, err := prioritySimRun(o)
	if err != nil {
		return err
	}
	return printPriority(out, o.json)
}

// prioritySimRun runs the flows on the simulator.
func prioritySimRun(o priorityOpts) (priorityOutput, error) {
	if err := o.validate(); err != nil {
		return priorityOutput{}, err
	}
	out := priorityOutput{Senders: o.senders, Size: o.size, RateBps: o.rate, Rounds: 1, CPUs: runtime.NumCPU(),
		FairMs: float64(o.fairTime().Microseconds()) / 1000, DeadlineMs: float64(o.d3Deadline().Microseconds()) / 1000,
		Setup: "simulator: not root, no testbed; virtual time"}
	// simRun runs one round and returns the flows and the receiver's pull queue (its
	// Quenched count is the simulator's counterpart of the stack's).
	simRun := func(policy pullpacer.Policy, opts func(i int) ndp.DialOptions) ([]*sim.Flow, *pullpacer.PullQueue, error) {
		star := simStar(float64(o.rate), 1500)
		star.Hosts = o.senders + 1
		star.Pulls.Policy = policy
		st, err := sim.NewStar(star)
		if err != nil {
			return nil, nil, err
		}
		flows := make([]*sim.Flow, o.senders)
		for i := range flows {
			flows[i] = &sim.Flow{ID: uint64(i + 1), Src: i + 1, Dst: 0, Size: o.size, Opts: opts(i)}
		}
		w, err := sim.NewWorkload(st.Network, flows)
		if err != nil {
			return nil, nil, err
		}
		st.Sim.Run(ndp.Time(10*o.fairTime()+time.Second), w.Done)
		return flows, st.Hosts[0].Pulls, nil
	}
	pols := map[string]pullpacer.Policy{"fair": pullpacer.PolicyFair, "priority": pullpacer.PolicyPriority, "deadline": pullpacer.PolicyDeadline}
	for _, p := range priorityPolicies {
		flows, _, err := simRun(pols[p.name], func(i int) ndp.DialOptions {
			switch {
			case i == 0 && p.name == "priority":
				return ndp.DialOptions{Priority: 1}
			case i == 0 && p.name == "deadline":
				return ndp.DialOptions{Size: o.size, Deadline: ndp.Time(o.d3Deadline())}
			}
			return ndp.DialOptions{}
		})
		if err != nil {
			return out, err
		}
		t := make([]flowOutcome, len(flows))
		for i, f := range flows {
			switch {
			case f.Done && errors.Is(f.Err, ndp.ErrDeadlineUnmeetable) && p.name == "deadline":
				t[i] = flowOutcome{d: time.Duration(f.FCT()), quenched: true, got: f.Received}
			case !f.Verified():
				return out, fmt.Errorf("simulated %s flow %d: not verified (done %v, %d of %d bytes, err %v)", p.name, i, f.Done, f.Received, f.Size, f.Err)
			default:
				t[i] = flowOutcome{d: time.Duration(f.FCT())}
			}
		}
		out.Policies = append(out.Policies, summarizePriority(p.name, o, [][]flowOutcome{t}))
	}
	dl := time.Duration(float64(o.size) * 8 / float64(4*o.rate) * 1e9)
	flows, pulls, err := simRun(pullpacer.PolicyDeadline, func(int) ndp.DialOptions {
		return ndp.DialOptions{Size: o.size, Deadline: ndp.Time(dl)}
	})
	if err != nil {
		return out, err
	}
	f := flows[0]
	u := unmeetableResult{NeededMbps: float64(o.size) * 8 / dl.Seconds() / 1e6, DeadlineMs: float64(dl.Microseconds()) / 1000,
		FailedAfter: float64(f.FCT()) / 1e6, Unmeetable: errors.Is(f.Err, ndp.ErrDeadlineUnmeetable),
		Quenched: pulls.Stats().Quenched} // every sender's flow carries the unmeetable deadline here
	u.SenderErr = "none: the flow completed"
	if f.Err != nil {
		u.SenderErr = f.Err.Error()
	}
	out.Unmeetable = u
	return out, nil
}

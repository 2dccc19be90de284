package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/sockapi"
)

// fabricFlags are the flags a benchmark shares to run its hosts through
// ndpswitch (--fabric switch) instead of its own veth topology: the switch's
// port rate, trimming personality and host NIC links. incast, rpc,
// throughput and priority take them; fabric "" is the benchmark's own
// topology (a veth pair or a Linux bridge).
type fabricFlags struct {
	fabric      string        // "switch", or "" for the benchmark's own topology
	link        int64         // --fabric switch: every port's emulated rate, bits/s
	personality string        // --fabric switch: "ndp" or "commodity"
	hostQueue   int           // --fabric switch: host NIC queue in frames (0: no NIC links)
	tick        time.Duration // --fabric switch: the switch loop's sleep between busy passes (softswitch.Config.Tick); autoTick: switchTickFor
	pullBatch   int           // the NDP stacks' PullBatch (0: the stacks' default)
}

// fabricFlagValues holds the flag values until parse turns them into a
// fabricFlags.
type fabricFlagValues struct {
	fabric      *string
	link        *bitRate
	personality *string
	hostQueue   *int
	tick        *string
	pullBatch   *int
	own         string
}

// registerFabricFlags adds --fabric, --link, --personality, --host-queue and
// --switch-tick to fs; own names the benchmark's topology without the switch
// (the --fabric default).
func registerFabricFlags(fs *flag.FlagSet, own, ownHelp string) fabricFlagValues {
	link := bitRate(10e9)
	v := fabricFlagValues{own: own, link: &link}
	v.fabric = fs.String("fabric", own, "what joins the hosts: "+own+" ("+ownHelp+") or switch (ndpswitch: NDP trimming queues and a drop-tail queue for kernel TCP at --link per port)")
	fs.Var(v.link, "link", "--fabric switch: emulated rate of every switch port (bits/s, e.g. 1G); the NDP pull rate too unless --rate is given")
	v.hostQueue = fs.Int("host-queue", 0, "--fabric switch: emulate each host's link into the switch at --link with a NIC queue of this many frames (0: frames enter the switch as fast as the veth delivers them)")
	v.personality = fs.String("personality", "ndp", "--fabric switch: trimming personality, ndp (NDP-aware) or commodity (cut to 128 bytes, DSCP rewrite)")
	v.tick = fs.String("switch-tick", "auto", "--fabric switch: "+switchTickUsage)
	v.pullBatch = fs.Int("pull-batch", 0, "the NDP stacks' pull batch: PULL slots one release covers, sent in one kick (0: the stacks' default)")
	return v
}

// parse returns the fabric flags after fs.Parse, and sets *rate to --link
// when the switch is on and --rate was not given.
func (v fabricFlagValues) parse(fs *flag.FlagSet, rate *int64) (fabricFlags, error) {
	switch *v.fabric {
	case v.own:
		f := fabricFlags{pullBatch: *v.pullBatch}
		return f, f.validate()
	case "switch":
	default:
		return fabricFlags{}, fmt.Errorf("--fabric %q: want %s or switch", *v.fabric, v.own)
	}
	tick, err := parseSwitchTick(*v.tick)
	if err != nil {
		return fabricFlags{}, err
	}
	f := fabricFlags{fabric: "switch", link: int64(*v.link), personality: *v.personality, hostQueue: *v.hostQueue, tick: tick, pullBatch: *v.pullBatch}
	rateSet := false
	fs.Visit(func(fl *flag.Flag) { rateSet = rateSet || fl.Name == "rate" })
	if !rateSet && rate != nil {
		*rate = f.link
	}
	return f, f.validate()
}

func (f fabricFlags) validate() error {
	if f.pullBatch < 0 || f.pullBatch > 16 {
		return fmt.Errorf("--pull-batch %d: want 0..16", f.pullBatch)
	}
	if f.fabric != "switch" {
		return nil
	}
	switch {
	case f.link < 1e6 || f.link > 400e9:
		return fmt.Errorf("--link %d: want 1M..400G", f.link)
	case f.personality != "ndp" && f.personality != "commodity":
		return fmt.Errorf("--personality %q: want ndp or commodity", f.personality)
	case f.hostQueue < 0 || f.hostQueue > 100000:
		return fmt.Errorf("--host-queue %d: want 0..100000", f.hostQueue)
	}
	return nil
}

// switchTickUsage is the help of --switch-tick (the fabric flags' and
// leafspine's).
const switchTickUsage = "while departures are due, the switch's loop sleeps this long after a pass that moved frames (one batch per port per tick, arrivals wait up to this long; saves the switch CPU on a loaded host, costs time on a quiet one): a duration up to 1ms (0: it polls again at once), or auto: 50us where a full frame takes 100us or more on a port (at most 120 Mb/s at MTU 1500), else 0"

// autoTick is a tick flag's "auto": switchTickFor picks the tick.
const autoTick = time.Duration(-1)

// parseSwitchTick parses --switch-tick: auto (autoTick) or 0..1ms.
func parseSwitchTick(s string) (time.Duration, error) {
	if s == "auto" {
		return autoTick, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > time.Millisecond {
		return 0, fmt.Errorf("--switch-tick %q: want auto or a duration 0..1ms", s)
	}
	return d, nil
}

// mtuOr1500 is the MTU a benchmark's links carry: its --mtu, or 1500
// where that is 0.
func mtuOr1500(mtu int) int {
	if mtu <= 0 {
		return 1500
	}
	return mtu
}

// switchTickFor is the switch loop's tick (softswitch.Config.Tick) for
// ports of rate bits/s and veths of MTU mtu (0: 1500) when the flag says
// auto: 50 µs where a full frame takes 100 µs or more on a port, else 0.
// Under SCHED_FIFO a switch without a tick wakes at every emulated
// departure of every port, which at 100 Mb/s is a frame time of 120 µs or
// more apart and cost the switch thread most of a CPU taken from the
// stacks on a 2-CPU machine: in the 100 Mb/s leaf-spine permutation (four
// 4 MB flows) 0.25-0.35 CPU s of each 0.4 s run against 0.11-0.16 with the
// tick (median flow 0.83 -> 0.90 of the link, docs/datapath.md "The
// leaf-spine permutation"), and in the 8 x 1 MB incast at 100 Mb/s 2.2
// against 1.2-1.3 CPU s a run, 1.06-1.11 against 1.02-1.04 times the
// optimum. A frame may leave up to a tick late or Horizon early: under
// half a frame's time at these rates. Where frames are shorter (12 µs at
// 1 Gb/s) a tick batches arrivals that would meet the queue a frame time
// apart, and the 1 Gb/s incast trimmed 4-6 times as much with 50 µs
// (docs/datapath.md, "A round's CPU at 1 Gb/s"), so no tick there.
func switchTickFor(rate int64, mtu int) time.Duration {
	mtu = mtuOr1500(mtu)
	if time.Duration(int64(mtu)*8*int64(time.Second)/rate) >= 100*time.Microsecond {
		return 50 * time.Microsecond
	}
	return 0
}

// on reports whether the hosts run through the switch.
func (f fabricFlags) on() bool { return f.fabric == "switch" }

// switchConfig is the switch the flags describe, for veths of MTU mtu (0:
// 1500).
func (f fabricFlags) switchConfig(mtu int) softswitch.Config {
	tick := f.tick
	if tick == autoTick {
		tick = switchTickFor(f.link, mtu)
	}
	cfg := softswitch.Config{Rate: f.link, HostQueue: f.hostQueue, Tick: tick}
	if f.personality == "commodity" {
		cfg.Personality = softswitch.TrimCommodity
	}
	return cfg
}

// star builds hosts hosts on the switch on tb (tb.Close stops it).
func (f fabricFlags) star(tb *testbed.Testbed, hosts, mtu int) (*softswitch.Star, error) {
	return softswitch.NewStar(tb, softswitch.StarConfig{Hosts: hosts, MTU: mtu, Switch: f.switchConfig(mtu)})
}

// fabricHost is one host namespace of a benchmark and its addressed link.
type fabricHost struct {
	ns   *testbed.Namespace
	link testbed.Link
}

// hosts builds n hosts on ndpswitch (the switch is returned, stopped by
// tb.Close) or, without --fabric switch, on a Linux bridge with addresses
// subnet.1, subnet.2, ... /24.
func (f fabricFlags) hosts(tb *testbed.Testbed, n, mtu int, subnet string) ([]fabricHost, *softswitch.Switch, error) {
	hosts := make([]fabricHost, n)
	if f.on() {
		star, err := f.star(tb, n, mtu)
		if err != nil {
			return nil, nil, err
		}
		for i, h := range star.Hosts {
			hosts[i] = fabricHost{h.NS, h.Link}
		}
		return hosts, star.Switch, nil
	}
	br, err := tb.NewNamespace()
	if err != nil {
		return nil, nil, err
	}
	if err := br.NewBridge("br0"); err != nil { // layer 2 only: no iptables on bridged frames
		return nil, nil, err
	}
	for i := range hosts {
		ns, err := tb.NewNamespace()
		if err != nil {
			return nil, nil, err
		}
		v, err := tb.NewVeth(ns, br, testbed.VethConfig{AddrA: fmt.Sprintf("%s.%d/24", subnet, i+1), MTU: mtu})
		if err != nil {
			return nil, nil, err
		}
		if _, err := br.Run("link", "set", v.B.Name, "master", "br0"); err != nil {
			return nil, nil, err
		}
		hosts[i] = fabricHost{ns, v.A}
	}
	return hosts, nil, nil
}

// pair builds two hosts on the switch and returns them as a testbed.Pair
// (namespaces A and B, Veth.A and Veth.B their addressed links: the hosts'
// ends of two veth pairs the switch joins), so a two-host benchmark runs on
// either topology unchanged.
func (f fabricFlags) pair(tb *testbed.Testbed, mtu int) (*testbed.Pair, *softswitch.Switch, error) {
	st, err := f.star(tb, 2, mtu)
	if err != nil {
		return nil, nil, err
	}
	a, b := st.Hosts[0], st.Hosts[1]
	return &testbed.Pair{A: a.NS, B: b.NS, Veth: &testbed.Veth{A: a.Link, B: b.Link}}, st.Switch, nil
}

// setup describes the switch for a benchmark's Setup line.
func (f fabricFlags) setup(sw *softswitch.Switch) string {
	c := sw.Config()
	return fmt.Sprintf("ndpswitch (%s trimming, %s b/s ports, NDP data queue %d packets, drop-tail queue %d frames for TCP, host NIC queues %d frames (0: none), loop tick %v)",
		c.Personality, formatRate(float64(f.link)), max(c.Fabric.DataQueue, 8), c.OtherQueue, f.hostQueue, c.Tick)
}

// rto is the NDP stacks' RTO on the switch (zero: the stacks' default off
// it): 4 x the time three 8-packet queues of full frames take to drain at
// --link, at least 1 ms, as ndpperf leafspine and hull use (at 100 Mb/s one
// such queue holds 1 ms, and a 1 ms RTO fires on queueing alone).
func (f fabricFlags) rto() time.Duration {
	if !f.on() {
		return 0
	}
	return switchRTO(f.link)
}

// iw is the stacks' initial window through the switch: the paper's 30
// packets, which its 8-packet queues and ndpsim's runs beside (IW 30) are
// sized for; 0 (ndp.DefaultIW, 93 at MTU 1500) on a veth pair or bridge,
// where no queue trims a first window.
func (f fabricFlags) iw() int {
	if !f.on() {
		return 0
	}
	return switchIW
}

// iwPackets is the initial window the stacks use at mtu, for Setup lines.
func (f fabricFlags) iwPackets(mtu int) int {
	if iw := f.iw(); iw != 0 {
		return iw
	}
	return ndp.DefaultIW(mtu)
}

// switchIW is the initial window of NDP stacks behind ndpswitch (fabricFlags.iw,
// ndpperf hull and leafspine).
const switchIW = 30

// switchRTO is rto for a link of rate bits/s.
func switchRTO(rate int64) time.Duration {
	return max(time.Millisecond, 4*3*8*time.Duration(1500*8*1e9/rate))
}

// commodityTrim is the stacks' setting for --personality commodity: the
// commodity switch's default DSCP values (softswitch.CommodityConfig), so the
// stacks mark their frames for it and take its trimmed frames as headers.
func (f fabricFlags) commodityTrim() sockapi.CommodityTrim {
	if !f.on() || f.personality != "commodity" {
		return sockapi.CommodityTrim{}
	}
	d := softswitch.DefaultCommodity()
	return sockapi.CommodityTrim{DataDSCP: d.DataDSCP, ControlDSCP: d.ControlDSCP, TrimDSCPs: []uint8{d.TrimDSCP}}
}

// switchStats snapshots sw's counters (zero without a switch).
func switchStats(sw *softswitch.Switch) softswitch.Stats {
	if sw == nil {
		return softswitch.Stats{}
	}
	return sw.Stats()
}

// Command ndpswitch is a software switch for veth testbeds: it joins the named
// interfaces of the current network namespace over AF_XDP and switches frames
// between them with NDP's trimming queues for NDP frames and a drop-tail queue for
// everything else, at an emulated port rate (internal/softswitch).
//
//	ip netns exec sw ndpswitch -ports sw-h1,sw-h2,sw-h3 -rate 1G
//
// With -spines N it emulates a two-tier leaf-spine fabric in the one process:
// "/" separates the leaves' ports, every leaf has a link to each spine, and
// leaves spread frames for other leaves over the spines by an ECMP hash of
// the 5-tuple:
//
//	ip netns exec sw ndpswitch -ports h1,h2/h3,h4 -spines 2 -rate 1G -degrade 1:1:100M
//
// It runs until SIGINT or SIGTERM and then prints its counters as JSON (also every
// -stats interval when set).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/internal/softswitch"
	"github.com/ndpstack/ndpstack/internal/units"
	"go.uber.org/zap"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "ndpswitch:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("ndpswitch", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ndpswitch -ports IF1,IF2[,...] [flags]  (root; the interfaces of this network namespace)")
		fs.PrintDefaults()
	}
	ports := fs.String("ports", "", "comma-separated interfaces to switch between (at least 2); with -spines, leaves separated by /")
	spines := fs.Int("spines", 0, "emulate a leaf-spine fabric with this many spines (0: one switch)")
	spineRate := fs.String("spine-rate", "", "emulated rate of every leaf-spine link (default: -rate)")
	var degrade []softswitch.LinkRate
	fs.Func("degrade", "LEAF:SPINE:RATE sets one leaf-spine link's rate, both directions (repeatable)", func(v string) error {
		f := strings.Split(v, ":")
		if len(f) != 3 {
			return fmt.Errorf("want LEAF:SPINE:RATE, got %q", v)
		}
		l, err1 := strconv.Atoi(f[0])
		sp, err2 := strconv.Atoi(f[1])
		r, err3 := units.ParseRate(f[2])
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		degrade = append(degrade, softswitch.LinkRate{Leaf: l, Spine: sp, Up: int64(r), Down: int64(r)})
		return nil
	})
	frameOverhead := fs.Int("frame-overhead", 0, "bytes each frame occupies on an emulated link beyond its length (24: Ethernet preamble, FCS and gap, as the NDP pull pacers count; 0: none)")
	hostQ := fs.Int("host-queue", 0, "emulate each host's link into the switch at -rate with a NIC queue of this many frames (0: off)")
	rate := fs.String("rate", "10G", "emulated rate of every port, bits/s (e.g. 1G, 10G, 25G)")
	dataQ := fs.Int("data-queue", 8, "NDP data queue per port, packets")
	hdrQ := fs.Int("header-queue", 0, "NDP header queue per port, bytes (0: data-queue x 9000)")
	wrr := fs.Int("wrr", 10, "header frames sent per data frame while both NDP queues are backlogged")
	trim := fs.String("trim", "random", "which data packet a full NDP queue trims: random, arrival, tail")
	noRTS := fs.Bool("no-return-to-sender", false, "drop trimmed headers that overflow the header queue instead of bouncing them")
	gamma := fs.Float64("phantom-gamma", 0, "HULL phantom queue drain rate as a fraction of -rate (0: no phantom queue)")
	phantomK := fs.Int("phantom-threshold", 0, "phantom queue marking threshold, bytes (0: 3000)")
	otherQ := fs.Int("other-queue", 100, "drop-tail queue of non-NDP frames (kernel TCP, ARP) per port, frames")
	otherECN := fs.Int("other-ecn", 0, "mark ECN CE on non-NDP frames arriving to at least this many queued frames (0: off)")
	personality := fs.String("personality", "ndp", "trimming: ndp (NDP-aware, sets the trimmed flag) or commodity (cut to -trim-size, DSCP rewrite)")
	trimSize := fs.Int("trim-size", 128, "commodity: bytes a trimmed frame is cut to")
	dataDSCP := fs.Uint("data-dscp", 10, "commodity: DSCP of trim-eligible frames")
	ctlDSCP := fs.Uint("control-dscp", 46, "commodity: DSCP of high-priority frames")
	trimDSCP := fs.Uint("trim-dscp", 46, "commodity: DSCP written into trimmed frames")
	ndpPort := fs.Uint("ndp-port", 6420, "UDP port of NDP frames")
	horizon := fs.Duration("horizon", 0, "send frames due within this of now in one batch (0: 20µs, or -tick + 20µs)")
	loopTick := fs.Duration("tick", 0, "while departures are due, sleep this long after a pass that moved frames: one transmit batch per port per tick, arrivals wait up to this long (0: poll again at once)")
	priority := fs.Int("priority", 1, "SCHED_FIFO priority of the switching thread, so that it runs at once beside busy-polling stacks (negative: the normal policy)")
	statsEvery := fs.Duration("stats", 0, "print counters as JSON this often (0: only at exit)")
	verbose := fs.Bool("v", false, "log setup and teardown")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	r, err := units.ParseRate(*rate)
	if err != nil {
		return fmt.Errorf("-rate: %w", err)
	}
	cfg := softswitch.Config{
		Rate: int64(r),
		Fabric: fabric.Config{DataQueue: *dataQ, HeaderQueueBytes: *hdrQ, WRRHeaders: *wrr,
			NoReturnToSender: *noRTS, PhantomRate: *gamma * r, PhantomThreshold: *phantomK},
		OtherQueue: *otherQ, OtherECN: *otherECN, NDPPort: uint16(*ndpPort), Horizon: *horizon, Tick: *loopTick, Priority: *priority,
		Commodity: softswitch.CommodityConfig{TrimSize: *trimSize, DataDSCP: uint8(*dataDSCP),
			ControlDSCP: uint8(*ctlDSCP), TrimDSCP: uint8(*trimDSCP)},
	}
	cfg.Spines, cfg.LinkRates, cfg.HostQueue, cfg.FrameOverhead = *spines, degrade, *hostQ, *frameOverhead
	if *spineRate != "" {
		r, err := units.ParseRate(*spineRate)
		if err != nil {
			return fmt.Errorf("-spine-rate: %w", err)
		}
		cfg.SpineRate = int64(r)
	}
	if *ports != "" {
		for l, group := range strings.Split(*ports, "/") {
			for _, p := range strings.Split(group, ",") {
				cfg.Ports = append(cfg.Ports, p)
				cfg.Leaf = append(cfg.Leaf, l)
			}
		}
		if *spines == 0 {
			if strings.Contains(*ports, "/") {
				return errors.New("-ports: / separates leaves, which need -spines")
			}
			cfg.Leaf = nil
		}
	}
	switch *trim {
	case "random":
		cfg.Fabric.Trim = fabric.TrimRandom
	case "arrival":
		cfg.Fabric.Trim = fabric.TrimArrival
	case "tail":
		cfg.Fabric.Trim = fabric.TrimTail
	default:
		return fmt.Errorf("-trim %q: want random, arrival or tail", *trim)
	}
	switch *personality {
	case "ndp":
	case "commodity":
		cfg.Personality = softswitch.TrimCommodity
	default:
		return fmt.Errorf("-personality %q: want ndp or commodity", *personality)
	}
	if *dataDSCP > 63 || *ctlDSCP > 63 || *trimDSCP > 63 || *ndpPort == 0 || *ndpPort > 65535 {
		return fmt.Errorf("a DSCP above 63 or -ndp-port %s out of range", strconv.FormatUint(uint64(*ndpPort), 10))
	}
	if *verbose {
		l, err := zap.NewDevelopment()
		if err != nil {
			return err
		}
		cfg.Logger = l
	}
	sw, err := softswitch.Open(cfg)
	if err != nil {
		return err
	}
	defer sw.Close()
	done := make(chan error, 1)
	go func() { done <- sw.Run() }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	shape := "one switch"
	if *spines > 0 {
		shape = fmt.Sprintf("leaf-spine, %d spines", *spines)
	}
	fmt.Fprintf(os.Stderr, "ndpswitch: switching %s (%s) at %s b/s per port (%s trimming); Ctrl-C to stop\n", *ports, shape, *rate, *personality)
	var tick <-chan time.Time
	if *statsEvery > 0 {
		t := time.NewTicker(*statsEvery)
		defer t.Stop()
		tick = t.C
	}
	enc := json.NewEncoder(os.Stdout)
	for {
		select {
		case <-tick:
			if err := enc.Encode(sw.Stats()); err != nil {
				return err
			}
		case <-sig:
			if err := sw.Close(); err != nil {
				return err
			}
			return enc.Encode(sw.Stats())
		case err := <-done:
			return err
		}
	}
}

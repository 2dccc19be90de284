// Command ndpsim runs NDP experiments in the discrete-event simulator, using the same
// ndp endpoints, pull queues and switch model that ndpstack ships.
//
//	ndpsim incast      --senders 7 --size 1MB --link 10G --mtu 9000 --queue 8 --iw 30 [--json]
//	ndpsim incast      --topo fattree --k 8 --senders 100 --size 135KB [--ecmp hash|path|random]
//	ndpsim permutation --topo fattree --k 8 --size 10MB [--slow-core-link 1G] [--json]
//	ndpsim transfer    --size 10MB --link 10G --loss 0.01 --dup 0.01 --reorder 0.01 [--json]
//	ndpsim reproduce   hull|d3|opf|omnet [--json] [--plot FILE.png]
//
// Topologies: a star (every host on one switch, the default for incast), a k-ary FatTree
// (--topo fattree --k K) or a two-tier leaf-spine (--topo leafspine --leaves L --spines S
// --hosts-per-leaf H), with per-packet ECMP on the UDP source port (--ecmp).
//
// Every run checks that each flow's bytes all arrived (bytes_verified) and reports the
// last flow's completion time against the theoretical optimum (overhead_pct). The hosts
// carry payload lengths, not bytes, unless --check-bytes (or --corrupt) is given: then
// every payload byte is written, sent, checksummed and checked against what was sent.
// Both make the same events and the same results.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/ndpstack/ndpstack/internal/chart"
	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/internal/sim"
	"github.com/ndpstack/ndpstack/internal/units"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
)

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	if stderrIsTerminal() {
		progress = newProgressLine(os.Stderr, time.Now)
	}
	switch os.Args[1] {
	case "incast":
		err = runIncast(os.Args[2:])
	case "transfer":
		err = runTransfer(os.Args[2:])
	case "permutation":
		err = runPermutation(os.Args[2:])
	case "reproduce":
		err = runReproduce(os.Args[2:])
	case "help", "-h", "--help":
		usage()
		return
	default:
		fmt.Fprintf(os.Stderr, "ndpsim: unknown experiment %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	progress.finish()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ndpsim %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: ndpsim <experiment> [flags]
experiments:
  incast       N senders each send one flow to one receiver at once
  permutation  every host of a FatTree / leaf-spine sends to one other and receives from one
  transfer     one flow between two hosts, optionally over faulty links
  reproduce    a paper's experiments beside its numbers: hull, d3, opf, omnet
run 'ndpsim <experiment> -h' for flags`)
}

// common holds the flags every experiment shares.
type common struct {
	link, size              string
	mtu, queue, iw, paths   int
	buffer                  string
	delay, rto              time.Duration
	adaptiveRTO             bool
	gamma, phantom          float64
	loss, dup, reorder, bad float64
	headerQueue             int
	noRTS                   bool
	seed                    uint64
	checkBytes              bool
	json                    bool
	topo                    topoFlags
	prof                    profileFlags
}

func (c *common) register(fs *flag.FlagSet, defSize string) {
	fs.StringVar(&c.link, "link", "10G", "link rate in bits/s (suffix K, M, G, T)")
	fs.StringVar(&c.size, "size", defSize, "bytes per flow (suffix KB, MB, GB = powers of 1000; KiB, MiB, GiB)")
	fs.IntVar(&c.mtu, "mtu", 9000, "IPv4 MTU in bytes")
	fs.IntVar(&c.queue, "queue", 8, "switch data queue, packets")
	fs.IntVar(&c.headerQueue, "header-queue", 0, "switch header queue, bytes (0: queue × 9000)")
	fs.BoolVar(&c.noRTS, "no-return-to-sender", false, "drop instead of bouncing headers that overflow the header queue")
	fs.IntVar(&c.iw, "iw", 30, "initial window, packets pushed in the first RTT")
	fs.IntVar(&c.paths, "paths", 0, "UDP source ports used as paths (0: endpoint default; FatTree/leaf-spine: the topology's path count)")
	fs.StringVar(&c.buffer, "buffer", "", "per-connection send and receive buffer, e.g. 4MiB (empty: endpoint default 256 KiB)")
	fs.DurationVar(&c.delay, "delay", time.Microsecond, "propagation delay of each link")
	fs.DurationVar(&c.rto, "rto", 0, "retransmission timeout (0: endpoint default, 1ms)")
	fs.BoolVar(&c.adaptiveRTO, "adaptive-rto", false, "adapt the RTO to measured RTTs as the AF_XDP stack does (default: the paper's fixed --rto)")
	fs.Float64Var(&c.gamma, "gamma", 1.0, "pull pacing as a fraction of the link rate (HULL headroom)")
	fs.Float64Var(&c.phantom, "phantom", 0, "HULL phantom queue on every switch port draining at this fraction of the link rate, marking CE above 3 KB (0: off)")
	fs.Float64Var(&c.loss, "loss", 0, "per-frame loss probability on every link")
	fs.Float64Var(&c.dup, "dup", 0, "per-frame duplication probability on every link")
	fs.Float64Var(&c.reorder, "reorder", 0, "per-frame reordering probability on every link")
	fs.Float64Var(&c.bad, "corrupt", 0, "per-frame corruption probability on every link")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed")
	fs.BoolVar(&c.checkBytes, "check-bytes", false, "carry real payload bytes and check every received byte (default: lengths only; same events, slower)")
	fs.BoolVar(&c.json, "json", false, "print one JSON object instead of a table")
	c.prof.register(fs)
}

func (c *common) star() (sim.StarConfig, int64, error) {
	rate, err := parseRate(c.link)
	if err != nil {
		return sim.StarConfig{}, 0, err
	}
	size, err := parseSize(c.size)
	if err != nil {
		return sim.StarConfig{}, 0, err
	}
	var buffer int64
	if c.buffer != "" {
		if buffer, err = parseSize(c.buffer); err != nil {
			return sim.StarConfig{}, 0, err
		}
	}
	cfg := sim.StarConfig{
		LinkRate:   rate,
		LinkDelay:  ndp.Time(c.delay),
		Endpoint:   ndp.Config{MTU: c.mtu, IW: c.iw, Paths: c.paths, RTO: c.rto, FixedRTO: !c.adaptiveRTO, SendBuffer: int(buffer), RecvBuffer: int(buffer)},
		Pulls:      pullpacer.QueueConfig{Gamma: c.gamma},
		Fabric:     fabric.Config{DataQueue: c.queue, HeaderQueueBytes: c.headerQueue, NoReturnToSender: c.noRTS, PhantomRate: c.phantom * rate},
		Faults:     sim.Faults{Loss: c.loss, Duplicate: c.dup, Reorder: c.reorder, Corrupt: c.bad},
		Seed:       c.seed,
		CheckBytes: c.checkBytes,
	}
	if progress != nil {
		cfg.Progress = progress.report
	}
	return cfg, size, nil
}

func runIncast(args []string) error {
	fs := flag.NewFlagSet("incast", flag.ContinueOnError)
	var c common
	c.register(fs, "1MB")
	c.topo.register(fs, "star")
	senders := fs.Int("senders", 7, "number of senders")
	plotFile := fs.String("plot", "", "also draw every flow's completion time, sorted, to this PNG file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *plotFile != "" {
		if err := chart.CheckName(*plotFile); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	stop, err := c.prof.start()
	if err != nil {
		return err
	}
	defer stop()
	star, size, err := c.star()
	if err != nil {
		return err
	}
	clos, err := c.topo.clos(star.Params())
	if err != nil {
		return err
	}
	r, err := sim.RunIncast(sim.IncastConfig{Star: star, Clos: clos, Senders: *senders, Size: size})
	if err != nil {
		return err
	}
	if *plotFile != "" {
		if err := plotIncast(*plotFile, r); err != nil {
			return err
		}
	}
	return report(r, c.json)
}

func runTransfer(args []string) error {
	fs := flag.NewFlagSet("transfer", flag.ContinueOnError)
	var c common
	c.register(fs, "10MB")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stop, err := c.prof.start()
	if err != nil {
		return err
	}
	defer stop()
	star, size, err := c.star()
	if err != nil {
		return err
	}
	r, err := sim.RunTransfer(sim.TransferConfig{Star: star, Size: size})
	if err != nil {
		return err
	}
	return report(r, c.json)
}

func report(r sim.Result, asJSON bool) error { return reportWith(r, r, asJSON, nil) }

// reportWith prints v as JSON, or r as a table followed by the rows extra writes, and
// fails unless every byte was verified.
func reportWith(v any, r sim.Result, asJSON bool, extra func(tw io.Writer)) error {
	progress.finish()
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "experiment\t%s\t%d flow(s) of %d bytes, %g Gb/s links, MTU %d, queue %d, IW %d\n",
			r.Experiment, r.Flows, r.SizeBytes, r.LinkGbps, r.MTU, r.Queue, r.IW)
		fmt.Fprintf(tw, "topology\t%s\t%d hosts, %d paths per connection\n", r.Topology, r.Hosts, r.Paths)
		fmt.Fprintf(tw, "completed\t%d of %d\tfailed %d\n", r.Completed, r.Flows, r.Failed)
		fmt.Fprintf(tw, "last flow completion\t%.1f us\toptimal %.1f us, overhead %.2f%%\n", r.LastFCTus, r.OptimalUs, r.OverheadPct)
		fmt.Fprintf(tw, "first / median flow\t%.1f us / %.1f us\n", r.FirstFCTus, r.MedianFCTus)
		fmt.Fprintf(tw, "goodput\t%.2f Gb/s\n", r.GoodputGbps)
		fmt.Fprintf(tw, "bytes verified\t%v\n", r.BytesVerified)
		fmt.Fprintf(tw, "switch\ttrimmed %d (uplinks %d, last hop %d), bounced %d (%.1f%% of trimmed), dropped %d, deepest data queue %d, phantom CE marks %d\n",
			r.Trimmed, r.TrimmedUplink, r.TrimmedLastHop, r.Bounced, r.BouncedPct, r.SwitchDrops, r.MaxQueue, r.PhantomMarks)
		fmt.Fprintf(tw, "endpoints\tnacks %d, retransmits %d, RTOs %d, bad frames %d\n", r.Nacks, r.Retransmits, r.RTOs, r.FrameErrors)
		fmt.Fprintf(tw, "faults injected\tlost %d, duplicated %d, reordered %d, corrupted %d\n", r.Lost, r.Duplicated, r.Reordered, r.Corrupted)
		if extra != nil {
			extra(tw)
		}
		if r.FirstError != "" {
			fmt.Fprintf(tw, "first error\t%s\n", r.FirstError)
		}
		tw.Flush()
	}
	if !r.BytesVerified {
		return fmt.Errorf("not every byte was delivered and verified (%d of %d flows completed)", r.Completed, r.Flows)
	}
	return nil
}

// parseRate and parseSize read rates and sizes as every tool does (internal/units).
var (
	parseRate = units.ParseRate
	parseSize = units.ParseSize
)

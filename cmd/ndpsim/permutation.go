package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/ndpstack/ndpstack/internal/chart"
	"github.com/ndpstack/ndpstack/internal/sim"
	"github.com/ndpstack/ndpstack/ndp"
)

func runPermutation(args []string) error {
	fs := flag.NewFlagSet("permutation", flag.ContinueOnError)
	var c common
	c.register(fs, "10MB")
	c.topo.register(fs, "fattree")
	warmup := fs.Duration("warmup", 0, "throughput window opens at this time (0: a tenth of one flow's ideal time)")
	plotFile := fs.String("plot", "", "also draw every flow's goodput, sorted, to this PNG file")
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
	if clos == nil {
		return fmt.Errorf("a permutation needs --topo fattree or leafspine")
	}
	r, err := sim.RunPermutation(sim.PermutationConfig{Clos: *clos, Size: size, Warmup: ndp.Time(*warmup)})
	if err != nil {
		return err
	}
	if *plotFile != "" {
		if err := plotPermutation(*plotFile, r); err != nil {
			return err
		}
	}
	return reportWith(r, r.Result, c.json, func(tw io.Writer) {
		fmt.Fprintf(tw, "window\t%.1f us .. %.1f us\t(warmup until the first flow completed)\n", r.WindowStartUs, r.WindowEndUs)
		fmt.Fprintf(tw, "flow goodput\tmean %.2f Gb/s, min %.2f, p10 %.2f, median %.2f, max %.2f\n",
			r.MeanFlowGbps, r.MinFlowGbps, r.P10FlowGbps, r.MedianFlowGbps, r.MaxFlowGbps)
		fmt.Fprintf(tw, "utilization\t%.1f%% of the link rate\t%.1f%% of the %.2f Gb/s a link can carry as payload\n",
			r.UtilizationPct, r.OfMaxGoodputPct, r.MaxGoodputGbps)
		fmt.Fprintf(tw, "uplink trims\t%.3f%% of data packets\n", r.UplinkTrimPct)
	})
}

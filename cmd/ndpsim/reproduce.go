package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/ndpstack/ndpstack/internal/chart"
	"github.com/ndpstack/ndpstack/internal/sim"
)

// runReproduce runs one paper's experiments and prints each figure's table with the
// paper's values beside ours.
func runReproduce(args []string) error {
	fs := flag.NewFlagSet("reproduce", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the tables as one JSON object")
	plotFile := fs.String("plot", "", "draw each figure the paper plots to this PNG file (FILE.png, FILE-2.png, ...)")
	var prof profileFlags
	prof.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: ndpsim reproduce NAME [--json] [--plot FILE.png]\nreproductions:")
		for _, r := range sim.Reproductions() {
			fmt.Fprintf(fs.Output(), "  %-6s %s\n", r.Name, r.Paper)
		}
		fs.PrintDefaults()
	}
	// The name may come before or after the flags.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	}
	if name == "" {
		fs.Usage()
		return fmt.Errorf("which reproduction?")
	}
	r, err := sim.FindReproduction(name)
	if err != nil {
		return err
	}
	if *plotFile != "" {
		if err := chart.CheckName(*plotFile); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	stop, err := prof.start()
	if err != nil {
		return err
	}
	defer stop()
	tables, err := r.Run()
	if err != nil {
		return err
	}
	if *plotFile != "" {
		if err := plotTables(*plotFile, tables); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Reproduction string      `json:"reproduction"`
			Paper        string      `json:"paper"`
			Tables       []sim.Table `json:"tables"`
		}{r.Name, r.Paper, tables})
	}
	printTables(os.Stdout, r.Paper, tables)
	return nil
}

func printTables(w io.Writer, paper string, tables []sim.Table) {
	fmt.Fprintf(w, "%s\n", paper)
	for _, t := range tables {
		fmt.Fprintf(w, "\n%s: %s\n", t.Name, t.Title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.Columns, "\t"))
		for _, row := range t.Rows {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
		for _, n := range t.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
}

// plotTables draws every table that has a plot: the first to file, the next to
// file-2.png and so on.
func plotTables(file string, tables []sim.Table) error {
	ext := filepath.Ext(file)
	base := strings.TrimSuffix(file, ext)
	k := 0
	for _, t := range tables {
		p := t.Plot
		if p == nil {
			continue
		}
		k++
		out := file
		if k > 1 {
			out = fmt.Sprintf("%s-%d%s", base, k, ext)
		}
		title := t.Name
		var err error
		if p.CDF {
			sets := make([]chart.Samples, len(p.Series))
			for i, s := range p.Series {
				sets[i] = chart.Samples{Name: s.Name, Values: s.X}
			}
			err = chart.CDF(out, title, p.XLabel, sets)
		} else {
			series := make([]chart.Series, len(p.Series))
			for i, s := range p.Series {
				series[i] = chart.Series{Name: s.Name, X: s.X, Y: s.Y}
			}
			err = chart.Lines(out, title, p.XLabel, p.YLabel, series)
		}
		if err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
		fmt.Fprintf(os.Stderr, "ndpsim: %s drawn to %s\n", t.Name, out)
	}
	return nil
}

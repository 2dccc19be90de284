package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/ndpstack/ndpstack/internal/benchreport"
)

// report: docs/BENCHMARKS.md from docs/results/*.json (internal/benchreport).

func init() {
	register(&subcommand{
		name:    "report",
		summary: "write docs/BENCHMARKS.md from the recorded results in docs/results/*.json",
		run:     runReport,
	})
}

func runReport(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	dir := fs.String("results", "docs/results", "directory of results files (scripts/bench-record writes them)")
	out := fs.String("o", "docs/BENCHMARKS.md", "report to write; - for stdout")
	check := fs.Bool("check", false, "write nothing; fail if the report differs from what the results give")
	if err := fs.Parse(args); err != nil {
		return err
	}
	recs, err := benchreport.Load(*dir)
	if err != nil {
		return err
	}
	md := benchreport.Render(recs)
	switch {
	case *check:
		old, err := os.ReadFile(*out)
		if err != nil {
			return err
		}
		if !bytes.Equal(old, md) {
			return fmt.Errorf("%s is not what %s gives: run go run ./cmd/ndpperf report", *out, *dir)
		}
		return nil
	case *out == "-":
		_, err = os.Stdout.Write(md)
		return err
	}
	return os.WriteFile(*out, md, 0o644)
}

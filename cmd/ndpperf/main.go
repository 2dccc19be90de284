// Command ndpperf runs ndpstack's benchmarks: raw AF_XDP ping-pong, shared-memory
// rings, RPC latency and incast, side by side with kernel sockets.
// Each prints a table, or one JSON object with --json; several draw the run with
// --plot FILE.png (internal/chart). `ndpperf report` writes docs/BENCHMARKS.md
// from the recorded results (scripts/bench-record, internal/benchreport).
//
// Each subcommand lives in its own file and registers itself in init, so the
// benchmarks of different packages stay independent:
//
//	ndpperf <subcommand> [flags]
//	ndpperf help
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// subcommand is one benchmark or tool of ndpperf.
type subcommand struct {
	name    string
	summary string
	// run parses its own flags from args (everything after the subcommand name).
	run func(args []string) error
}

var subcommands = map[string]*subcommand{}

// register adds a subcommand; called from init functions in this package.
func register(c *subcommand) {
	if _, dup := subcommands[c.name]; dup {
		panic("ndpperf: duplicate subcommand " + c.name)
	}
	subcommands[c.name] = c
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: ndpperf <subcommand> [flags]")
	fmt.Fprintln(os.Stderr, "subcommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, subcommands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "run 'ndpperf <subcommand> -h' for its flags")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	c, ok := subcommands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "ndpperf: unknown subcommand %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := c.run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "ndpperf %s: %v\n", c.name, err)
		os.Exit(1)
	}
}

// printJSON writes v as one JSON object on stdout.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

package main

import (
	"errors"
	"flag"
	"os/exec"
	"strings"
	"testing"
)

// TestMulticoreScriptCommands checks every benchmark that scripts/bench-multicore
// runs: an ndpperf subcommand whose flags parse. The script runs on another
// machine, where a renamed flag would cost the whole run. Each command is run
// with -h appended, so its flags are parsed and nothing is measured.
func TestMulticoreScriptCommands(t *testing.T) {
	out, err := exec.Command("bash", "../../scripts/bench-multicore", "--list").Output()
	if err != nil {
		t.Fatalf("bench-multicore --list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("bench-multicore --list printed %d benchmarks, want at least 10:\n%s", len(lines), out)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		i := 0
		for i < len(f) && f[i] != "ndpperf" {
			i++
		}
		if i+1 >= len(f) {
			t.Errorf("%q: no ndpperf command", line)
			continue
		}
		c, ok := subcommands[f[i+1]]
		if !ok {
			t.Errorf("%s: ndpperf has no subcommand %q", f[0], f[i+1])
			continue
		}
		args := append(f[i+2:len(f):len(f)], "-h")
		if err := c.run(args); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: ndpperf %s: flags do not parse: %v", f[0], strings.Join(f[i+1:], " "), err)
		}
	}
}

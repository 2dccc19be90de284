package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// TestRPCDaemonModeSmoke runs `ndpperf rpc --mode daemon` end to end (two
// ndpd children over a veth testbed, apps attached through the rings) on a
// few hundred RPCs beside embedded stacks and checks that every RPC
// completed. It measures
// nothing: `ndpperf rpc --mode daemon` is the measurement.
func TestRPCDaemonModeSmoke(t *testing.T) {
	testbed.RequireRoot(t)
	bin := filepath.Join(t.TempDir(), "ndpperf")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "rpc", "--mode", "daemon", "-n", "300", "-warmup", "30", "-rounds", "3", "-compare", "embedded", "-cores", "shared", "-json")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ndpperf rpc --mode daemon: %v\n%s", err, out)
	}
	var res rpcOutput
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("output: %v\n%s", err, out)
	}
	if len(res.Results) != 2 || res.Results[0].Transport != "ndp" || res.Results[1].Transport != "embedded" {
		t.Fatalf("results: %+v", res.Results)
	}
	for _, r := range res.Results {
		if r.N != 300 || r.Lost != 0 || r.P50us <= 0 {
			t.Fatalf("results: %+v", res.Results)
		}
	}
	if _, ok := res.Ratios["ndp_p50_over_embedded_p50"]; !ok {
		t.Fatalf("ratios: %v", res.Ratios)
	}
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// ndpperfBinary builds this command once for the tests that run it as a
// process (the daemon modes re-execute it as ndpd children).
func ndpperfBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "ndpperf-test"); binErr != nil {
			return
		}
		if out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "ndpperf"), ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "ndpperf")
}

// runJSON runs the built ndpperf with args and decodes its JSON output into v.
func runJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	cmd := exec.Command(ndpperfBinary(t), args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ndpperf %v: %v\n%s", args, err, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("ndpperf %v output: %v\n%s", args, err, out)
	}
}

// TestThroughputDaemonMode runs `ndpperf throughput --mode daemon` on a
// small transfer: the daemon, embedded and TCP runs all deliver every byte
// (SHA-256 checked) and the ratio is reported. It measures nothing.
func TestThroughputDaemonMode(t *testing.T) {
	testbed.RequireRoot(t)
	var out throughputOutput
	runJSON(t, &out, "throughput", "--mode", "daemon", "--size", "4MB", "--runs", "1", "--json")
	if len(out.Runs) != 3 || out.Runs[0].Transport != "ndp" || out.Runs[1].Transport != "ndp-daemon" || out.Runs[2].Transport != "tcp" {
		t.Fatalf("runs %+v", out.Runs)
	}
	for _, r := range out.Runs {
		if !r.Verified || r.Bytes != 4e6 || r.Mbps <= 0 {
			t.Fatalf("run %+v", r)
		}
	}
	if out.DaemonOverEmbedded <= 0 || out.Runs[1].Sender == nil || out.Runs[1].Sender.DataOut == 0 {
		t.Fatalf("daemon over embedded %v, daemon sender counters %+v", out.DaemonOverEmbedded, out.Runs[1].Sender)
	}
}

// TestScaleSmoke runs `ndpperf scale` with one and two queues briefly:
// both complete RPCs, and with two queues both queues carry frames. It
// measures nothing.
func TestScaleSmoke(t *testing.T) {
	testbed.RequireRoot(t)
	var out scaleOutput
	runJSON(t, &out, "scale", "--queues", "1,2", "--duration", "300ms", "--warmup", "100ms", "--rounds", "1", "--json")
	if len(out.Rows) != 2 || out.Rows[0].Queues != 1 || out.Rows[1].Queues != 2 {
		t.Fatalf("rows %+v", out.Rows)
	}
	for _, r := range out.Rows {
		if r.RPCsPerS <= 0 || len(r.QueueRx) != r.Queues {
			t.Fatalf("row %+v", r)
		}
		for q, n := range r.QueueRx {
			if n == 0 {
				t.Fatalf("%d queues: queue %d received nothing (%v)", r.Queues, q, r.QueueRx)
			}
		}
	}
}

// TestRPCDaemonModeSmoke runs `ndpperf rpc --mode daemon` end to end (two
// ndpd children over a veth testbed, apps attached through the rings) on a
// few hundred RPCs beside embedded stacks and checks that every RPC
// completed. It measures
// nothing: `ndpperf rpc --mode daemon` is the measurement.
func TestRPCDaemonModeSmoke(t *testing.T) {
	testbed.RequireRoot(t)
	bin := ndpperfBinary(t)
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
		checkCPU(t, r)
	}
	if _, ok := res.Ratios["ndp_p50_over_embedded_p50"]; !ok {
		t.Fatalf("ratios: %v", res.Ratios)
	}
}

// The daemon RPC hosts two applications in this process and adds a P for
// each while it runs (appProcs); closing gives them back.
func TestAddProcsRestores(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	undo := addProcs(appProcs)
	if got := runtime.GOMAXPROCS(0); got != before+appProcs {
		t.Fatalf("GOMAXPROCS %d while running, want %d", got, before+appProcs)
	}
	undo()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after, want %d", got, before)
	}
}

// procCPU, which reads the ndpd children's CPU time from /proc, agrees
// with getrusage on this process (to its 10 ms ticks).
func TestProcCPU(t *testing.T) {
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	ru, proc := processCPU(), procCPU(os.Getpid())
	if proc.total() <= 0 || (ru.total()-proc.total()).Abs() > 30*time.Millisecond {
		t.Fatalf("/proc/self/stat %v + %v, getrusage %v + %v", proc.user, proc.sys, ru.user, ru.sys)
	}
}

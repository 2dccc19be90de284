package benchreport

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestKind(t *testing.T) {
	for cmd, want := range map[string]string{
		"go run ./cmd/ndpperf rpc --json":                        "ndpperf rpc",
		"/tmp/x/ndpperf xdp-tx --json":                           "ndpperf xdp-tx",
		"./ndpsim permutation --k 8":                             "ndpsim permutation",
		"go run ./cmd/ndpsim incast --json":                      "ndpsim incast",
		"bash -c go test -run XXX -bench . ./ndp | gobench-json": "go test -bench",
		"ndpperf":        "",
		"python3 foo.py": "",
	} {
		if got := Kind(cmd); got != want {
			t.Errorf("Kind(%q) = %q, want %q", cmd, got, want)
		}
	}
}

// TestRenderFixtures renders every shape in testdata: known shapes get their
// tables, keys their renderer does not know still appear, and an unknown
// command's output is rendered generically.
func TestRenderFixtures(t *testing.T) {
	recs, err := Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 5 {
		t.Fatalf("%d records", len(recs))
	}
	md := string(Render(recs))
	for _, want := range []string{
		"# Benchmarks",
		// index
		"| [rpc](#rpc-latency-1-kib) | RPC latency, 1 KiB | 2026-11-25T06:00Z | `0123456789ab` | 3.25 |",
		// provenance
		"    go run ./cmd/ndpperf rpc --size 1024 --n 20000 --json\n",
		"`docs/results/rpc.json`: commit `0123456789ab`, 2026-11-25T06:00Z, 2-CPU x86_64 debian VM, 2 CPUs, Linux 6.18.0, load average 3.25 before the run.",
		"commit `0123456789ab` (with uncommitted changes)",
		// rpc: latency table with the mode column, the CPU per exchange (absent
		// in older results: no column), an unknown per-result column,
		// ratios, escaped setup
		"| transport | mode | p50 µs | p90 µs | p99 µs | p99.9 µs | mean µs | RPCs | lost | CPU µs per exchange | of it user | of it system | CPUs busy | in flight | new_per_result |",
		"| ndp | busy | 8.46 | 9.1 | 14.2 | 40.5 | 8.9 | 20000 | 0 | 12.5 | 8.25 | 4.25 | 1.9 | 0.98 | 7 |",
		"| tcp-newconn |  | 61.02 | 70 | 95.5 | 300 | 65 | 20000 | 0 |  |  |  |  |  |  |",
		"CPUs 2 · process CPU % with no turn running 1.5 · setup:",
		"| ndp_p50_over_tcp-newconn_p50 | 0.14 |",
		`setup: two namespaces \| veth`,
		// a top-level figure the renderer does not know
		"| optimal_ms | 0.004 |",
		// throughput: summary, the new ratio, runs left out
		"| tcp | 9000 | 8800 | 9100 |",
		"| ndp / tcp (medians) | 0.69 |",
		// ndpsim permutation: figures, zero fault counters left out, non-zero shown
		"| over optimal % | 23.1 |",
		"| flow goodput min Gb/s | 8.2 |",
		"| trimmed on last hop | 12 |",
		"| every byte verified | yes |",
		"experiment permutation · topology fattree k=4 · hosts 16",
		// rpc counters: one column per side, rows that are zero everywhere left out
		"counters (non-zero):\n\n| counter | NDP client | NDP server |\n|---|---|---|\n| data_out | 20000 | 20001 |\n| retransmits | 2 | 0 |\n\n",
		// incast: the simulator's row, stack, kernel and switch counters, new figures
		"fabric: switch · switch port b/s 1000000000 · MTU 1500",
		"| ndp (sim) | 4 | 65536 | 2.15 | 2.15 | 2.15 |  | 1 |",
		"| counter | ndp client | ndp servers | tcp (kernel) |",
		"| retransmits | 3 | 60 |  |",
		"| retrans_segs |  |  | 40 |",
		"| counter | ndp | tcp |\n|---|---|---|\n| rx_frames | 9000 | 8000 |\n| trimmed | 120 | 0 |\n| tcp_drops | 0 | 35 |",
		"| sim_over_switch | 0.98 |",
		// unknown command: scalars, short arrays, arrays of objects, nested objects
		"| loss_pct | 1 |",
		"| samples | 1, 2, 3 |",
		"cases:\n\n| fault | ndp_mbps | tcp_mbps | recovered |",
		"| link down | 450 |  | yes |",
		"settings:\n\n| figure | value |\n|---|---|\n| rate | 10G |",
		"inner:\n\n| figure | value |\n|---|---|\n| depth | 2 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, unwanted := range []string{"sha256_verified", "quenched", "received_bytes", "rto_fires", "| frames lost", "flows failed", "| events", "flow_gbps", "trimmed on uplinks"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("report shows %q", unwanted)
		}
	}
	if !bytes.Equal(Render(recs), []byte(md)) {
		t.Error("Render is not deterministic")
	}
	if testing.Verbose() {
		t.Log("\n" + md)
	}
}

func TestNumber(t *testing.T) {
	for in, want := range map[string]string{"12": "12", "8.46": "8.46", "4834.032": "4834.032", "62861.1054": "62861.1",
		"23.014877": "23.01", "0.28397313": "0.284", "0.0091666": "0.00917", "-1.23456": "-1.23", "1e-05": "1e-05"} {
		if got := number(json.Number(in)); got != want {
			t.Errorf("number(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{`[]`, `{"name":"x"}`, `{"output":{}} {}`, `{"output":`} {
		if _, err := Parse("x.json", []byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

// TestBenchmarksMDCurrent fails when docs/BENCHMARKS.md is not what the
// recorded results give, so the report cannot go stale: after recording a
// result (scripts/bench-record), run go run ./cmd/ndpperf report.
func TestBenchmarksMDCurrent(t *testing.T) {
	recs, err := Load("../../docs/results")
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../../docs/BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, Render(recs)) {
		t.Fatal("docs/BENCHMARKS.md is not what docs/results/*.json give: run go run ./cmd/ndpperf report")
	}
}

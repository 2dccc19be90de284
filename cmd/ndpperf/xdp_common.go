package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/ndpstack/ndpstack/afxdp"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"golang.org/x/sys/unix"
)

// Helpers shared by the pingpong and xdp-tx subcommands.

// errNeedRoot is what the AF_XDP benchmarks say when run unprivileged.
var errNeedRoot = errors.New("needs root: it creates network namespaces, veth pairs, AF_XDP sockets and an XDP program (run with sudo)")

func requireRoot() error {
	if os.Geteuid() != 0 {
		return errNeedRoot
	}
	return nil
}

// lockAndPin locks the calling goroutine to its OS thread and pins the thread
// to cpu (when the machine has it). The goroutine must not unlock: when it
// returns, the runtime discards the pinned thread instead of reusing it.
func lockAndPin(cpu int) error {
	runtime.LockOSThread()
	if cpu < 0 || cpu >= runtime.NumCPU() {
		return nil
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin thread to CPU %d: %w", cpu, err)
	}
	return nil
}

// cpuPair returns the CPUs for the two ends of a benchmark: 0 and 1 when
// there are two, otherwise -1 (no pinning) for the second.
func cpuPair() (int, int) {
	if runtime.NumCPU() >= 2 {
		return 0, 1
	}
	return 0, -1
}

// newPair builds the two-namespace veth testbed the benchmarks run over.
func newPair() (*testbed.Testbed, *testbed.Pair, error) {
	tb, err := testbed.New()
	if err != nil {
		return nil, nil, err
	}
	p, err := tb.NewPair(testbed.VethConfig{AddrA: "10.201.0.1/24", AddrB: "10.201.0.2/24"})
	if err != nil {
		tb.Close()
		return nil, nil, err
	}
	return tb, p, nil
}

// latencyResult is one transport's round-trip distribution.
type latencyResult struct {
	Transport string  `json:"transport"`
	P50us     float64 `json:"p50_us"`
	P90us     float64 `json:"p90_us"`
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	MeanUs    float64 `json:"mean_us"`
	N         int     `json:"n"`
	Lost      int     `json:"lost"`
	Mode      string  `json:"mode,omitempty"`

	samplesUs []float64 // every round trip in µs, ascending, for --plot
}

func summarize(transport string, rtts []time.Duration, lost int, mode string) latencyResult {
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	at := func(q float64) float64 {
		if len(rtts) == 0 {
			return 0
		}
		i := int(q * float64(len(rtts)-1))
		return round2(float64(rtts[i]) / 1e3)
	}
	var sum time.Duration
	for _, r := range rtts {
		sum += r
	}
	mean := 0.0
	if len(rtts) > 0 {
		mean = round2(float64(sum) / float64(len(rtts)) / 1e3)
	}
	us := make([]float64, len(rtts))
	for i, r := range rtts {
		us[i] = float64(r) / 1e3
	}
	return latencyResult{Transport: transport, P50us: at(0.50), P90us: at(0.90), P99us: at(0.99), P999us: at(0.999),
		MeanUs: mean, N: len(rtts), Lost: lost, Mode: mode, samplesUs: us}
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func parseAttach(s string) (afxdp.AttachMode, error) {
	switch s {
	case "auto", "":
		return afxdp.AttachAuto, nil
	case "native":
		return afxdp.AttachNative, nil
	case "generic":
		return afxdp.AttachGeneric, nil
	}
	return 0, fmt.Errorf("attach mode %q: want auto, native or generic", s)
}

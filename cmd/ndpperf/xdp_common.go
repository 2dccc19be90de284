package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
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
	tb, err := newTestbed()
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
	// CPU time per exchange over the transport's turns after the first
	// (the first carries the whole warmup, from cold; each later turn's
	// 200 unmeasured exchanges are included): the process's user and
	// system time (getrusage RUSAGE_SELF, every thread, so also anything
	// else of the process that ran during the turns) plus, for transports
	// with processes of their own (ndpd), theirs, over the exchanges made
	// in those turns. A spinning waiter's CPU is counted as it is spent: a
	// busy-polling transport's figure is its threads' occupancy, not only
	// its work.
	CPUUsPerExchange     float64 `json:"cpu_us_per_exchange,omitempty"`
	CPUUserUsPerExchange float64 `json:"cpu_user_us_per_exchange,omitempty"`
	CPUSysUsPerExchange  float64 `json:"cpu_sys_us_per_exchange,omitempty"`
	// TurnCPUs is that CPU time over the turns' wall time: how many CPUs
	// the transport kept busy (2 for two threads that never stop spinning).
	TurnCPUs float64 `json:"turn_cpus,omitempty"`
	// InFlight is how many exchanges were in flight on average over the
	// same turns, by Little's law: their measured exchanges' mean round
	// trip (standing in for their unmeasured ones' too) times their
	// exchanges over their wall time. N for N clients that never pause;
	// less where clients wait between exchanges or finish their shares at
	// different times.
	InFlight float64 `json:"in_flight,omitempty"`
	// ClientShareMin and ClientShareMax are, for several clients drawing
	// their round trips from one pool (roundTripsConcurrent), the fewest
	// and the most round trips one client made over the counted turns, as
	// a fraction of an even share (1 each when the clients kept pace).
	ClientShareMin float64 `json:"client_share_min,omitempty"`
	ClientShareMax float64 `json:"client_share_max,omitempty"`

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

// cpuTime is user and system CPU time.
type cpuTime struct{ user, sys time.Duration }

func (c cpuTime) add(d cpuTime) cpuTime { return cpuTime{c.user + d.user, c.sys + d.sys} }
func (c cpuTime) sub(d cpuTime) cpuTime { return cpuTime{c.user - d.user, c.sys - d.sys} }
func (c cpuTime) total() time.Duration  { return c.user + c.sys }

// processCPU is this process's CPU time so far, every thread's
// (getrusage(RUSAGE_SELF): the kernel's per-thread runtimes summed, exact to
// the nanosecond in total, split between user and system by its tick
// samples); zero if getrusage fails.
func processCPU() cpuTime {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return cpuTime{}
	}
	return cpuTime{user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano())}
}

// perExchange sets r's CPU figures and exchanges in flight from the CPU
// time its counted turns took, their wall time, their exchanges and the
// sum and number of their measured round trips.
func (r *latencyResult) perExchange(c cpuTime, wall time.Duration, exchanges int, rttSum time.Duration, rttN int) {
	if exchanges <= 0 || wall <= 0 {
		return
	}
	r.TurnCPUs = round2(float64(c.total()) / float64(wall))
	if rttN > 0 {
		r.InFlight = round2(float64(rttSum) / float64(rttN) * float64(exchanges) / float64(wall))
	}
	us := func(d time.Duration) float64 { return round2(float64(d) / 1e3 / float64(exchanges)) }
	r.CPUUserUsPerExchange, r.CPUSysUsPerExchange = us(c.user), us(c.sys)
	r.CPUUsPerExchange = us(c.user + c.sys)
}

// clientShares sets r's client shares from each client's round trips.
func (r *latencyResult) clientShares(made []int) {
	total := 0
	for _, n := range made {
		total += n
	}
	if len(made) < 2 || total == 0 {
		return
	}
	even := float64(total) / float64(len(made))
	lo, hi := slices.Min(made), slices.Max(made)
	r.ClientShareMin, r.ClientShareMax = round2(float64(lo)/even), round2(float64(hi)/even)
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

package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"

	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ndpstack/ndpstack/internal/chart"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
)

func init() {
	register(&subcommand{
		name:    "pacer",
		summary: "pull pacing thread accuracy, burst, idle CPU and wake latency",
		run:     runPacer,
	})
}

// pacerResult is the JSON report of `ndpperf pacer`.
//
// Spacing error: the pacing thread stamps every PULL with its clock reading at the
// moment it releases it (Release.At). For consecutive releases k-1, k the error is
// |At_k - At_{k-1} - interval| / interval, in percent; p50/p99 are over all gaps of the
// run. max_burst is the longest run of releases less than half an interval apart.
// missed_pct is the share of the run's pull slots (span / interval) that carried no
// PULL. cpu_idle_pct_when_empty is the pacing thread's own CPU time (per-thread CPU
// clock) over a period with an empty queue, as a percent of one core.
type pacerResult struct {
	IntervalNs          float64 `json:"interval_ns"`
	DurationS           float64 `json:"duration_s"`
	Released            int     `json:"released"`
	P50ErrPct           float64 `json:"p50_err_pct"`
	P99ErrPct           float64 `json:"p99_err_pct"`
	P999ErrPct          float64 `json:"p999_err_pct"`
	MaxBurst            int     `json:"max_burst"`
	MissedPct           float64 `json:"missed_pct"`
	Hiccups             int     `json:"gaps_over_1_5_intervals"`
	Stalls              int     `json:"stalls_over_10_intervals"`
	MaxGapUs            float64 `json:"max_gap_us"`
	LateSlots           uint64  `json:"late_slots"`
	CPUBusyPct          float64 `json:"cpu_busy_pct"`
	StealPct            float64 `json:"cpu_steal_pct"`
	VolSwitches         int64   `json:"thread_voluntary_switches"`
	InvolSwitches       int64   `json:"thread_involuntary_switches"`
	CPUIdlePctWhenEmpty float64 `json:"cpu_idle_pct_when_empty"`
	WakeP50Us           float64 `json:"wake_p50_us"`
	WakeP99Us           float64 `json:"wake_p99_us"`
	Park                string  `json:"park"`
	CPU                 int     `json:"cpu"`
	Isolated            bool    `json:"isolated"`
	Nice                int     `json:"nice"`
	Conns               int     `json:"conns"`
	Parks               uint64  `json:"parks"`
	ReleaseStalls       uint64  `json:"release_ring_stalls"`
}

func runPacer(args []string) error {
	fs := flag.NewFlagSet("pacer", flag.ContinueOnError)
	interval := fs.Duration("interval", 1200*time.Nanosecond, "PULL spacing (pull bytes x 8 / link rate)")
	duration := fs.Duration("duration", 2*time.Second, "how long to pace a full queue")
	idle := fs.Duration("idle", time.Second, "how long to measure the pacing thread's CPU with an empty queue")
	cpu := fs.Int("cpu", -1, "pin the pacing thread to this CPU (-1: no pinning)")
	nice := fs.Int("nice", 0, "nice value for the pacing thread (-20..19; 0 leaves it)")
	isolate := fs.Bool("isolate", true, "with --cpu, move this process's other threads off that CPU")
	park := fs.String("park", "futex", "idle parking: futex or channel")
	conns := fs.Int("conns", 64, "connections sharing the queue")
	wakes := fs.Int("wakes", 200, "wake-latency samples (one pull into a parked pacer each)")
	jsonOut := fs.Bool("json", false, "print JSON")
	plotFile := fs.String("plot", "", "also draw the histogram of PULL spacings to this PNG file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *plotFile != "" {
		if err := chart.CheckName(*plotFile); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	if *interval <= 0 || *duration <= 0 || *idle <= 0 || *conns <= 0 || *wakes < 0 {
		return errors.New("--interval, --duration, --idle and --conns must be > 0")
	}
	mode := pullpacer.ParkFutex
	switch *park {
	case "futex":
	case "channel":
		mode = pullpacer.ParkChannel
	default:
		return fmt.Errorf("--park %q: want futex or channel", *park)
	}

	// 1500-byte pulls at the rate that gives the requested spacing.
	const pullBytes = 1500
	rate := int64(math.Round(pullBytes * 8 * 1e9 / float64(*interval)))
	const ringSize = 1 << 19
	p, err := pullpacer.NewPacer(pullpacer.PacerConfig{
		Queue:       pullpacer.QueueConfig{LinkRate: rate, PullBytes: pullBytes},
		Pin:         *cpu >= 0,
		CPU:         *cpu,
		Park:        mode,
		Nice:        *nice,
		RequestRing: 1024,
		ReleaseRing: ringSize,
	})
	if err != nil {
		return err
	}
	defer p.Close()
	iv := float64(*interval)
	isolated := false
	if *cpu >= 0 && *isolate {
		if isolated, err = isolateCPU(*cpu, p.ThreadID()); err != nil {
			return err
		}
	}

	// Phase 1: a full queue for --duration. The queue is preloaded with more pulls than
	// the run can release (spread over --conns connections), so a starved consumer can
	// never empty it; the transmit side is a no-op consumer that drains the release
	// ring every 200µs (the ring buffers ~0.6s at 1.2µs, so it never fills).
	expect := int(float64(*duration)/iv) + 1024
	at := make([]ndp.Time, 0, expect)
	reqs := make([]pullpacer.Request, 0, *conns)
	per := int64(expect / *conns * 11 / 10 + 1)
	for h := 1; h <= *conns; h++ {
		reqs = append(reqs, pullpacer.Request{Op: pullpacer.OpAdd, Handle: ndp.Handle(h), N: per})
	}
	if err := enqueueAll(p, reqs); err != nil {
		return err
	}
	rel := make([]pullpacer.Release, 4096)
	cpu0, err := p.ThreadCPUTime()
	if err != nil {
		return err
	}
	vol0, invol0 := ctxSwitches(p.ThreadID())
	steal0, total0 := cpuSteal(*cpu)
	wall0 := time.Now()
	for done := false; !done; {
		done = time.Since(wall0) >= *duration // one last drain after the end
		for {
			n := p.Poll(rel)
			if n == 0 {
				break
			}
			for _, r := range rel[:n] {
				if r.Kind == pullpacer.ReleasePull {
					at = append(at, r.At)
				}
			}
		}
		if !done {
			time.Sleep(200 * time.Microsecond)
		}
	}
	cpu1, _ := p.ThreadCPUTime()
	wall1 := time.Now()
	vol1, invol1 := ctxSwitches(p.ThreadID())
	steal1, total1 := cpuSteal(*cpu)
	// Stop feeding; drop the backlog.
	reqs = reqs[:0]
	for h := 1; h <= *conns; h++ {
		reqs = append(reqs, pullpacer.Request{Op: pullpacer.OpRemove, Handle: ndp.Handle(h)})
	}
	if err := enqueueAll(p, reqs); err != nil {
		return err
	}
	res := pacerResult{IntervalNs: iv, DurationS: duration.Seconds(), Park: *park, CPU: *cpu, Conns: *conns, Isolated: isolated, Nice: *nice}
	res.CPUBusyPct = 100 * float64(cpu1-cpu0) / float64(wall1.Sub(wall0))
	res.VolSwitches, res.InvolSwitches = vol1-vol0, invol1-invol0
	if total1 > total0 {
		res.StealPct = 100 * float64(steal1-steal0) / float64(total1-total0)
	}
	spacingStats(at, iv, &res)
	if *plotFile != "" {
		if err := plotSpacing(*plotFile, at, iv); err != nil {
			return err
		}
	}

	// Phase 2: empty queue. Wait for the thread to park, then measure its CPU time.
	deadline := time.Now().Add(5 * time.Second)
	for !p.Parked() && time.Now().Before(deadline) {
		drainReleases(p, rel)
		time.Sleep(time.Millisecond)
	}
	drainReleases(p, rel)
	c0, _ := p.ThreadCPUTime()
	w0 := time.Now()
	time.Sleep(*idle)
	c1, _ := p.ThreadCPUTime()
	res.CPUIdlePctWhenEmpty = 100 * float64(c1-c0) / float64(time.Since(w0))

	// Phase 3: wake latency. One pull into a parked pacer; latency = its release
	// stamp minus the pacer-clock time just before Enqueue.
	var lat []float64
	for k := 0; k < *wakes; k++ {
		for !p.Parked() && time.Now().Before(deadline.Add(time.Minute)) {
			time.Sleep(500 * time.Microsecond)
		}
		t0 := p.Now()
		if err := enqueueAll(p, []pullpacer.Request{{Op: pullpacer.OpAdd, Handle: 1, N: 1}}); err != nil {
			return err
		}
		for {
			if n := p.Poll(rel[:1]); n == 1 {
				lat = append(lat, float64(rel[0].At-t0)/1e3)
				break
			}
			runtime.Gosched()
		}
		time.Sleep(time.Millisecond) // let it park again
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		res.WakeP50Us = pct(lat, 50)
		res.WakeP99Us = pct(lat, 99)
	}
	st := p.Stats()
	res.LateSlots = st.Queue.LateSlots
	res.Parks = st.Parks
	res.ReleaseStalls = st.ReleaseStalls
	if *jsonOut {
		return printJSON(res)
	}
	fmt.Printf("interval %.0fns over %.1fs: %d pulls, spacing error p50 %.2f%% p99 %.2f%% p99.9 %.2f%%, max burst %d, missed %.2f%%, gaps>1.5 intervals %d, >10 intervals %d (max gap %.1fus)\n",
		res.IntervalNs, res.DurationS, res.Released, res.P50ErrPct, res.P99ErrPct, res.P999ErrPct, res.MaxBurst, res.MissedPct, res.Hiccups, res.Stalls, res.MaxGapUs)
	fmt.Printf("pacing thread CPU: %.1f%% busy (context switches: %d voluntary, %d involuntary; hypervisor steal %.1f%%), %.2f%% of a core with an empty queue; wake latency p50 %.1fus p99 %.1fus (%s)\n",
		res.CPUBusyPct, res.VolSwitches, res.InvolSwitches, res.StealPct, res.CPUIdlePctWhenEmpty, res.WakeP50Us, res.WakeP99Us, res.Park)
	return nil
}

// spacingStats fills the spacing fields of res from release stamps.
func spacingStats(at []ndp.Time, iv float64, res *pacerResult) {
	res.Released = len(at)
	if len(at) < 2 {
		return
	}
	errs := make([]float64, 0, len(at)-1)
	burst, maxBurst := 1, 1
	var maxGap ndp.Time
	for k := 1; k < len(at); k++ {
		gap := at[k] - at[k-1]
		errs = append(errs, 100*math.Abs(float64(gap)-iv)/iv)
		if float64(gap) < iv/2 {
			burst++
		} else {
			burst = 1
		}
		maxBurst = max(maxBurst, burst)
		maxGap = max(maxGap, gap)
		if float64(gap) > 1.5*iv {
			res.Hiccups++
		}
		if float64(gap) > 10*iv {
			res.Stalls++
		}
	}
	slices.Sort(errs)
	res.P50ErrPct = pct(errs, 50)
	res.P99ErrPct = pct(errs, 99)
	res.P999ErrPct = pct(errs, 99.9)
	res.MaxBurst = maxBurst
	res.MaxGapUs = float64(maxGap) / 1e3
	slots := float64(at[len(at)-1]-at[0])/iv + 1
	res.MissedPct = 100 * (1 - float64(len(at))/slots)
}

// pct returns the p-th percentile of sorted xs (nearest rank).
func pct(xs []float64, p float64) float64 {
	k := int(math.Ceil(p/100*float64(len(xs)))) - 1
	return xs[min(max(k, 0), len(xs)-1)]
}

// enqueueAll hands every request to the pacer, waiting while its ring is full.
func enqueueAll(p *pullpacer.Pacer, reqs []pullpacer.Request) error {
	for len(reqs) > 0 {
		n, err := p.Enqueue(reqs)
		if err != nil {
			return err
		}
		reqs = reqs[n:]
		if len(reqs) > 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return nil
}

func drainReleases(p *pullpacer.Pacer, buf []pullpacer.Release) {
	for p.Poll(buf) > 0 {
	}
}

// ctxSwitches reads a thread's voluntary and involuntary context switch counts from
// /proc/self/task/<tid>/status (zeros if unavailable). Involuntary switches are the
// kernel taking the CPU away; voluntary ones include the Go runtime parking the
// locked thread when it preempts the pacing goroutine.
func ctxSwitches(tid int) (vol, invol int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", tid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "voluntary_ctxt_switches":
			vol = n
		case "nonvoluntary_ctxt_switches":
			invol = n
		}
	}
	return vol, invol
}

// cpuSteal returns the steal and total jiffies of one CPU (or of all CPUs for cpu < 0)
// from /proc/stat: time the hypervisor ran something else while this VM wanted the CPU.
func cpuSteal(cpu int) (steal, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	name := "cpu"
	if cpu >= 0 {
		name = fmt.Sprintf("cpu%d", cpu)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != name {
			continue
		}
		for k, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			total += n
			if k == 7 { // user nice system idle iowait irq softirq steal
				steal = n
			}
		}
	}
	return steal, total
}

// isolateCPU restricts every thread of this process except the pacing thread to the
// other CPUs, so the benchmark's own consumer, GC workers and timers do not preempt
// the pacer. Threads created later inherit the mask (a locked pacing thread never
// clones: the Go runtime creates threads from a template thread instead). Other
// processes still share the CPU. Reports false when there is no other CPU.
func isolateCPU(cpu, pacerTID int) (bool, error) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return false, err
	}
	all.Clear(cpu)
	if all.Count() == 0 {
		return false, nil
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == pacerTID {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &all); err != nil && !errors.Is(err, unix.ESRCH) {
			return false, fmt.Errorf("isolate cpu %d: thread %d: %w", cpu, tid, err)
		}
	}
	return true, nil
}

package pullpacer

import (
	"time"

	"golang.org/x/sys/unix"
)

const futexSupported = true

// maxCPU is the largest CPU index sched_setaffinity accepts through unix.CPUSet.
const maxCPU = 1024

func gettid() int { return unix.Gettid() }

// pinToCPU restricts the calling OS thread to one CPU.
func pinToCPU(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set) // pid 0: the calling thread
}

// setThreadNice sets the calling thread's nice value (Linux priorities are per thread).
func setThreadNice(nice int) error {
	return unix.Setpriority(unix.PRIO_PROCESS, 0, nice)
}

// ThreadCPUTime returns the CPU time (user+system) the pacing thread has consumed, read
// from its per-thread CPU clock (clock_gettime on MAKE_THREAD_CPUCLOCK(tid,
// CPUCLOCK_SCHED), nanosecond resolution, readable from any thread of the process).
func (p *Pacer) ThreadCPUTime() (time.Duration, error) {
	tid := p.tid.Load()
	if tid == 0 {
		return 0, ErrClosed
	}
	// include/linux/posix-timers.h: (~pid << 3) | CPUCLOCK_PERTHREAD_MASK(4) | CPUCLOCK_SCHED(2)
	clk := int32(^uint32(tid)<<3) | 6
	var ts unix.Timespec
	if err := unix.ClockGettime(clk, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}

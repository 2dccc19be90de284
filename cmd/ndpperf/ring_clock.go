package main

import (
	_ "unsafe" // for go:linkname

	"golang.org/x/sys/unix"
)

// monoNow returns CLOCK_MONOTONIC in nanoseconds through the runtime's vDSO
// path (runtime.nanotime reads CLOCK_MONOTONIC on Linux). Two processes on
// one machine read the same clock, so a timestamp written by one and read by
// the other gives a one-way latency. unix.ClockGettime would be a real
// syscall on every sample.
//
//go:linkname monoNow runtime.nanotime
func monoNow() int64

// checkMonoClock verifies that monoNow is CLOCK_MONOTONIC (within 1 ms).
func checkMonoClock() error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return err
	}
	d := monoNow() - ts.Nano()
	if d < -1e6 || d > 1e6 {
		return errMonoClock
	}
	return nil
}

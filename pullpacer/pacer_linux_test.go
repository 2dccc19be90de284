package pullpacer

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPacerPinning(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for c := 0; c < maxCPU; c++ {
		if allowed.IsSet(c) {
			cpu = c
			break
		}
	}
	base := runtime.NumGoroutine()
	p, err := NewPacer(PacerConfig{Queue: tenGig, Pin: true, CPU: cpu})
	if err != nil {
		t.Fatalf("pin to CPU %d: %v", cpu, err)
	}
	// The pacing thread runs on that CPU only.
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(p.ThreadID(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Count() != 1 || !got.IsSet(cpu) {
		t.Fatalf("pacing thread affinity %v, want only CPU %d", got, cpu)
	}
	p.Close()
	// A CPU that does not exist: sched_setaffinity fails, NewPacer reports it, and
	// the thread is gone.
	if _, err := NewPacer(PacerConfig{Queue: tenGig, Pin: true, CPU: maxCPU - 1}); err == nil {
		t.Fatal("pinning to CPU 1023 succeeded")
	}
	if _, err := NewPacer(PacerConfig{Queue: tenGig, Pin: true, CPU: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("CPU -1: %v", err)
	}
	if _, err := NewPacer(PacerConfig{Queue: tenGig, Nice: 40}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Nice 40: %v", err)
	}
	checkNoLeak(t, base)
}

func TestPacerNice(t *testing.T) {
	p, err := NewPacer(PacerConfig{Queue: tenGig, Nice: 5}) // raising nice needs no privilege
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// getpriority returns 20 - nice for a thread id.
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, p.ThreadID())
	if err != nil {
		t.Fatal(err)
	}
	if nice := 20 - prio; nice != 5 {
		t.Fatalf("pacing thread nice %d, want 5", nice)
	}
}

package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// profileFlags are the profiling outputs a benchmark can write over its
// measured part: a CPU profile, a mutex-contention profile, an
// allocation profile and a runtime execution trace (go tool pprof / go
// tool trace). Both ends of a testbed benchmark run in this process, so
// one profile covers sender and receiver (and the kernel TCP runs, which
// take turns with NDP's: profile with --runs 1 or read by function).
type profileFlags struct {
	cpu, mutex, allocs, trace string
}

func (p *profileFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&p.mutex, "mutexprofile", "", "write a mutex contention profile of the run to this file")
	fs.StringVar(&p.allocs, "memprofile", "", "write an allocation profile (every allocation sampled) of the run to this file")
	fs.StringVar(&p.trace, "trace", "", "write a runtime execution trace of the run to this file")
}

// start begins the profiles asked for; the returned function stops them
// and writes the files (once; later calls do nothing).
func (p profileFlags) start() (stop func() error, err error) {
	var cpuF, traceF *os.File
	closeAll := func() {
		if cpuF != nil {
			pprof.StopCPUProfile()
			cpuF.Close()
		}
		if traceF != nil {
			trace.Stop()
			traceF.Close()
		}
	}
	if p.cpu != "" {
		if cpuF, err = os.Create(p.cpu); err != nil {
			return nil, err
		}
		if err = pprof.StartCPUProfile(cpuF); err != nil {
			cpuF.Close()
			return nil, err
		}
	}
	if p.trace != "" {
		if traceF, err = os.Create(p.trace); err != nil {
			closeAll()
			return nil, err
		}
		if err = trace.Start(traceF); err != nil {
			traceF.Close()
			traceF = nil
			closeAll()
			return nil, err
		}
	}
	if p.mutex != "" {
		runtime.SetMutexProfileFraction(1)
	}
	oldRate := runtime.MemProfileRate
	if p.allocs != "" {
		runtime.MemProfileRate = 1
	}
	stopped := false
	return func() error {
		if stopped {
			return nil
		}
		stopped = true
		closeAll()
		var first error
		write := func(name, path string) {
			if path == "" {
				return
			}
			f, err := os.Create(path)
			if err == nil {
				err = pprof.Lookup(name).WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil && first == nil {
				first = fmt.Errorf("%s profile: %w", name, err)
			}
		}
		write("mutex", p.mutex)
		write("allocs", p.allocs)
		runtime.SetMutexProfileFraction(0)
		runtime.MemProfileRate = oldRate
		return first
	}, nil
}

package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
)

// profileFlags write Go CPU and allocation profiles of a run (go tool pprof reads them).
type profileFlags struct {
	cpu, mem string
}

func (p *profileFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&p.mem, "memprofile", "", "write an allocation profile (Go's default sampling) to this file at the end of the run")
}

// start begins the requested profiles; the returned stop ends them and writes the
// allocation profile, reporting a failure on stderr (the run's result stands).
func (p *profileFlags) start() (stop func(), err error) {
	var cpu *os.File
	if p.cpu != "" {
		if cpu, err = os.Create(p.cpu); err != nil {
			return nil, err
		}
		if err = pprof.StartCPUProfile(cpu); err != nil {
			cpu.Close()
			return nil, err
		}
	}
	return func() {
		if err := p.stop(cpu); err != nil {
			fmt.Fprintf(os.Stderr, "ndpsim: profile: %v\n", err)
		}
	}, nil
}

func (p *profileFlags) stop(cpu *os.File) error {
	if cpu != nil {
		pprof.StopCPUProfile()
		if err := cpu.Close(); err != nil {
			return err
		}
	}
	if p.mem == "" {
		return nil
	}
	f, err := os.Create(p.mem)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("memprofile: %w", err)
	}
	return f.Close()
}

package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

var signalOnce sync.Once

// newTestbed is testbed.New for the benchmarks. The first call installs the
// handler that, when SIGINT or SIGTERM ends a run (Ctrl-C, a timeout),
// removes every testbed of the process and exits with 128 plus the signal's
// number; a second signal ends the process at once.
func newTestbed() (*testbed.Testbed, error) {
	signalOnce.Do(removeTestbedsOnSignal)
	return testbed.New()
}

// testbedRemoveBound is how long the handler waits for the testbeds to go
// before it exits anyway (the next run's testbed.New reaps what is left).
const testbedRemoveBound = 10 * time.Second

func removeTestbedsOnSignal() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		signal.Reset(syscall.SIGINT, syscall.SIGTERM)
		fmt.Fprintf(os.Stderr, "ndpperf: %v: removing the testbed\n", s)
		done := make(chan error, 1)
		go func() { done <- testbed.CloseAll() }()
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintf(os.Stderr, "ndpperf: %v\n", err)
			}
		case <-time.After(testbedRemoveBound):
			fmt.Fprintf(os.Stderr, "ndpperf: the testbed was not removed within %v; the next run removes what is left\n", testbedRemoveBound)
		}
		code := 1
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		os.Exit(code)
	}()
}

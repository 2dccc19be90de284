package main

import (
	"fmt"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
)

// openStack opens an embedded stack with cfg on interface ifname, inside
// namespace ns (cfg.Interface is set to ifname).
func openStack(ns *testbed.Namespace, ifname string, cfg sockapi.Config) (s *sockapi.Stack, err error) {
	cfg.Interface = ifname
	err = ns.Do(func() (err error) {
		s, err = sockapi.Open(cfg)
		return err
	})
	return s, err
}

// spinUsage is the help of --spin, which incast and leafspine take.
const spinUsage = "how long a waiting NDP call or idle stack polls before it sleeps: a duration, never (sleep at once, parked in the Go runtime like a kernel socket's goroutine), or auto: never while the process runs more stacks than CPUs, else the stack's default"

// parseSpin parses a --spin value: auto (fixed false: pickSpin decides),
// never (-1) or a positive duration.
func parseSpin(s string) (spin time.Duration, fixed bool, err error) {
	switch s {
	case "auto":
		return 0, false, nil
	case "never":
		return -1, true, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("--spin %q: want a positive duration, never or auto", s)
	}
	return d, true, nil
}

// pickSpin is the NDP stacks' Spin (sockapi.Config; 0: the default, -1:
// never) for stacks stacks in this process on ncpu CPUs: spin when fixed,
// else (--spin auto) never while the stacks outnumber the CPUs. Five
// stacks' spinning waiters on two CPUs took the CPU from the goroutines
// that had work and, with a stack asleep in ppoll holding its P, kept
// woken goroutines waiting hundreds of µs for one (docs/datapath.md, the
// incast); in the leaf-spine permutation the four stacks used a fifth less
// CPU (docs/datapath.md, "The leaf-spine permutation"). Sleeping at once,
// parked in the runtime, is how the kernel TCP run's goroutines wait in the
// same process.
func pickSpin(spin time.Duration, fixed bool, stacks, ncpu int) time.Duration {
	if fixed {
		return spin
	}
	if stacks > ncpu {
		return -1
	}
	return 0
}

// spinName names a Spin for a benchmark's setup line.
func spinName(spin time.Duration) string {
	switch {
	case spin < 0:
		return "never"
	case spin > 0:
		return spin.String()
	}
	return "default"
}

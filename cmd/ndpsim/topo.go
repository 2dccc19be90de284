package main

import (
	"flag"
	"fmt"

	"github.com/ndpstack/ndpstack/internal/sim"
)

// topoFlags choose the topology an experiment runs on.
type topoFlags struct {
	kind                       string
	k, leaves, spines, perLeaf int
	ecmp                       string
	slowRate                   string
	failCoreLink               bool
	changedCore, changedPod    int
}

func (t *topoFlags) register(fs *flag.FlagSet, defKind string) {
	fs.StringVar(&t.kind, "topo", defKind, "topology: star, fattree or leafspine")
	fs.IntVar(&t.k, "k", 8, "FatTree arity (even): k³/4 hosts, k²/4 core switches")
	fs.IntVar(&t.leaves, "leaves", 8, "leaf-spine: leaf switches")
	fs.IntVar(&t.spines, "spines", 4, "leaf-spine: spine switches")
	fs.IntVar(&t.perLeaf, "hosts-per-leaf", 4, "leaf-spine: hosts per leaf")
	fs.StringVar(&t.ecmp, "ecmp", "hash", "uplink choice: hash (5-tuple incl. UDP source port), path (the sender's path index picks the core), random (per packet)")
	fs.StringVar(&t.slowRate, "slow-core-link", "", "degrade the cable between core --core and pod --pod to this rate in both directions (paper Fig. 22: 1G)")
	fs.BoolVar(&t.failCoreLink, "fail-core-link", false, "the cable between core --core and pod --pod loses every frame (a failure routing has not removed yet)")
	fs.IntVar(&t.changedCore, "core", 0, "core (spine) switch of the changed link")
	fs.IntVar(&t.changedPod, "pod", 0, "pod (leaf) of the changed link")
}

// clos returns the multi-tier topology the flags describe, or nil for the star.
func (t *topoFlags) clos(p sim.Params) (*sim.ClosConfig, error) {
	ecmp, err := sim.ParseECMPMode(t.ecmp)
	if err != nil {
		return nil, err
	}
	cfg := &sim.ClosConfig{K: t.k, Leaves: t.leaves, Spines: t.spines, HostsPerLeaf: t.perLeaf, ECMP: ecmp, Params: p}
	switch t.kind {
	case "star":
		if t.slowRate != "" || t.failCoreLink {
			return nil, fmt.Errorf("a star has no core links to change")
		}
		return nil, nil
	case "fattree":
		cfg.Kind = sim.FatTree
	case "leafspine":
		cfg.Kind = sim.LeafSpine
	default:
		return nil, fmt.Errorf("unknown topology %q (want star, fattree or leafspine)", t.kind)
	}
	if t.slowRate != "" || t.failCoreLink {
		ch := sim.LinkChange{Core: t.changedCore, Pod: t.changedPod}
		if t.slowRate != "" {
			if ch.Rate, err = parseRate(t.slowRate); err != nil {
				return nil, err
			}
		}
		if t.failCoreLink {
			ch.Loss = 1
		}
		cfg.Changes = append(cfg.Changes, ch)
	}
	return cfg, nil
}

package softswitch

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// Star is K hosts on one software switch: every host namespace has one veth
// whose peer is a port of the switch, which runs in a namespace of its own.
// A leaf-spine Star (NewLeafSpine) is the same with the switch emulating a
// two-tier fabric.
type Star struct {
	NS     *testbed.Namespace // the switch's namespace
	Switch *Switch
	Hosts  []StarHost
}

// StarHost is one host of a Star.
type StarHost struct {
	NS   *testbed.Namespace
	Link testbed.Link // the host's end (addressed)
	Port string       // the switch's end, a switch port
	Leaf int          // the host's leaf (leaf-spine); 0 on one switch
}

// StarConfig configures NewStar.
type StarConfig struct {
	// Hosts is the number of hosts, 2..64.
	Hosts int
	// MTU of every veth; zero means 1500.
	MTU int
	// Switch configures the switch; NewStar sets its Ports.
	Switch Config
}

// LeafSpineConfig configures NewLeafSpine.
type LeafSpineConfig struct {
	// Leaves and HostsPerLeaf: Leaves x HostsPerLeaf hosts (2..64 in all),
	// host i on leaf i / HostsPerLeaf. Leaves at least 2.
	Leaves, HostsPerLeaf int
	// MTU of every veth; zero means 1500.
	MTU int
	// Switch configures the fabric: Spines (at least 1), SpineRate,
	// LinkRates; NewLeafSpine sets Ports and Leaf.
	Switch Config
}

var starSubnet atomic.Uint32

// NewStar builds the star on tb, opens the switch inside its namespace and
// starts it. Host i has address 10.<n>.0.<i+1>/24 for a per-process n. tb.Close
// stops the switch before it deletes the namespaces.
func NewStar(tb *testbed.Testbed, cfg StarConfig) (*Star, error) {
	if cfg.Hosts < 2 || cfg.Hosts > maxPorts {
		return nil, fmt.Errorf("%w: %d hosts, want 2..%d", ErrConfig, cfg.Hosts, maxPorts)
	}
	return build(tb, make([]int, cfg.Hosts), cfg.MTU, cfg.Switch)
}

// NewLeafSpine builds a two-tier leaf-spine fabric on tb: Leaves x
// HostsPerLeaf hosts, each with one veth to a port of its leaf; the leaves,
// the spines and the links between them are emulated by one switch process
// (Config.Spines) in a namespace of its own. All hosts share one /24
// (10.<n>.0.<i+1>): ARP broadcasts cross the fabric along its flood tree.
// tb.Close stops the switch before it deletes the namespaces.
func NewLeafSpine(tb *testbed.Testbed, cfg LeafSpineConfig) (*Star, error) {
	n := cfg.Leaves * cfg.HostsPerLeaf
	switch {
	case cfg.Leaves < 2 || cfg.HostsPerLeaf < 1 || n > maxPorts:
		return nil, fmt.Errorf("%w: %d leaves x %d hosts, want at least 2 leaves and 2..%d hosts", ErrConfig, cfg.Leaves, cfg.HostsPerLeaf, maxPorts)
	case cfg.Switch.Spines < 1:
		return nil, fmt.Errorf("%w: Switch.Spines %d, want at least 1", ErrConfig, cfg.Switch.Spines)
	}
	leaf := make([]int, n)
	for i := range leaf {
		leaf[i] = i / cfg.HostsPerLeaf
	}
	return build(tb, leaf, cfg.MTU, cfg.Switch)
}

// build makes one host per entry of leaf (its leaf), joined to the switch.
func build(tb *testbed.Testbed, leaf []int, mtu int, sc Config) (*Star, error) {
	swNS, err := tb.NewNamespace()
	if err != nil {
		return nil, err
	}
	n := 100 + (uint32(os.Getpid())+starSubnet.Add(1))%100
	st := &Star{NS: swNS}
	var ports []string
	for i := range leaf {
		ns, err := tb.NewNamespace()
		if err != nil {
			return nil, err
		}
		v, err := tb.NewVeth(ns, swNS, testbed.VethConfig{AddrA: fmt.Sprintf("10.%d.0.%d/24", n, i+1), MTU: mtu, NoTxChecksum: true})
		if err != nil {
			return nil, err
		}
		st.Hosts = append(st.Hosts, StarHost{NS: ns, Link: v.A, Port: v.B.Name, Leaf: leaf[i]})
		ports = append(ports, v.B.Name)
	}
	sc.Ports = ports
	if sc.Spines > 0 {
		sc.Leaf = leaf
	}
	err = swNS.Do(func() (err error) {
		st.Switch, err = Open(sc)
		return err
	})
	if err != nil {
		return nil, err
	}
	tb.OnClose(st.Switch)
	go st.Switch.Run() // returns nil when tb.Close closes the switch
	return st, nil
}

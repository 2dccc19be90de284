package sim

import (
	"fmt"
)

// ClosKind selects a multi-tier topology.
type ClosKind uint8

const (
	// FatTree is the k-ary three-tier FatTree of Al-Fares et al. (the NDP paper's
	// simulated topology): k pods of k/2 edge (top-of-rack) and k/2 aggregation switches,
	// k²/4 core switches, k³/4 hosts, every switch with k ports.
	FatTree ClosKind = iota
	// LeafSpine is a two-tier Clos: Leaves leaf switches with HostsPerLeaf hosts each,
	// every leaf cabled once to each of Spines spine switches.
	LeafSpine
)

func (k ClosKind) String() string {
	switch k {
	case FatTree:
		return "fattree"
	case LeafSpine:
		return "leafspine"
	}
	return fmt.Sprintf("ClosKind(%d)", uint8(k))
}

// LinkChange alters the cable between core (spine) switch Core and pod (leaf) Pod in
// both directions, to model the paper's asymmetric network (Figure 22: one core to
// upper-pod link negotiated down to 1 Gb/s) or a failed link routing has not yet
// removed (Loss 1).
type LinkChange struct {
	Core, Pod int
	// Rate replaces the link rate in bits per second. Zero keeps it.
	Rate float64
	// Loss is a per-frame loss probability added to the link's faults.
	Loss float64
}

// ClosConfig describes a FatTree or leaf-spine network, every link alike unless changed.
type ClosConfig struct {
	Kind ClosKind
	// K is the FatTree arity: even, at least 2. K³/4 hosts.
	K int
	// Leaves, Spines and HostsPerLeaf shape a LeafSpine (each at least 1, Leaves at
	// least 2 or HostsPerLeaf at least 2).
	Leaves, Spines, HostsPerLeaf int
	// ECMP is how switches choose among their uplinks. Zero is ECMPHash.
	ECMP ECMPMode
	// Changes alter core links after the network is built.
	Changes []LinkChange
	// Params are the hosts', links' and switch ports' parameters. When
	// Params.Endpoint.Paths is zero it is set to the topology's number of shortest
	// paths between pods (K²/4, or Spines), at most 256: senders know the topology
	// (paper section 3.1.1).
	Params
}

// Clos is a built FatTree or leaf-spine network.
type Clos struct {
	*Network
	cfg ClosConfig
	// Edge are the top-of-rack switches (leaves), Agg the aggregation switches (nil for
	// a leaf-spine), Core the core switches (spines).
	Edge, Agg, Core []*Switch
	// Paths is the number of shortest paths between hosts in different pods (leaves).
	Paths int

	rackHosts int // hosts per edge switch
	podHosts  int // hosts per pod (FatTree) or per leaf
	coreLinks map[[2]int][2]*Link
}

// Hosts reports how many hosts cfg's topology has (0 if the shape is invalid).
func (cfg ClosConfig) Hosts() int {
	if cfg.Kind == LeafSpine {
		return cfg.Leaves * cfg.HostsPerLeaf
	}
	return cfg.K * cfg.K * cfg.K / 4
}

// TopologyPaths reports the number of shortest paths between pods (leaves).
func (cfg ClosConfig) TopologyPaths() int {
	if cfg.Kind == LeafSpine {
		return cfg.Spines
	}
	return cfg.K * cfg.K / 4
}

func (cfg *ClosConfig) validate() error {
	switch cfg.Kind {
	case FatTree:
		if cfg.K < 2 || cfg.K%2 != 0 {
			return fmt.Errorf("sim: FatTree arity k=%d must be even and at least 2", cfg.K)
		}
	case LeafSpine:
		if cfg.Leaves < 1 || cfg.Spines < 1 || cfg.HostsPerLeaf < 1 {
			return fmt.Errorf("sim: leaf-spine needs leaves, spines and hosts per leaf >= 1 (got %d, %d, %d)",
				cfg.Leaves, cfg.Spines, cfg.HostsPerLeaf)
		}
	default:
		return fmt.Errorf("sim: unknown topology kind %d", cfg.Kind)
	}
	if cfg.ECMP > ECMPRandom {
		return fmt.Errorf("sim: unknown ECMP mode %d", cfg.ECMP)
	}
	return nil
}

// NewClos builds the topology. Host i sits under edge switch i / (hosts per rack);
// hosts are numbered rack by rack, pod by pod. Hosts have no App until the caller sets
// one.
func NewClos(cfg ClosConfig) (*Clos, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Endpoint.Paths == 0 {
		cfg.Endpoint.Paths = min(cfg.TopologyPaths(), 256)
	}
	n, err := newNetwork(cfg.Kind.String(), cfg.Params, cfg.Hosts())
	if err != nil {
		return nil, err
	}
	c := &Clos{Network: n, cfg: cfg, Paths: cfg.TopologyPaths(), coreLinks: map[[2]int][2]*Link{}}
	if cfg.Kind == LeafSpine {
		err = c.buildLeafSpine()
	} else {
		err = c.buildFatTree()
	}
	if err != nil {
		return nil, err
	}
	for _, ch := range cfg.Changes {
		ls, ok := c.coreLinks[[2]int{ch.Core, ch.Pod}]
		if !ok {
			return nil, fmt.Errorf("sim: no link between core %d and pod %d", ch.Core, ch.Pod)
		}
		if ch.Rate < 0 || ch.Loss < 0 || ch.Loss > 1 {
			return nil, fmt.Errorf("sim: bad link change %+v", ch)
		}
		for _, l := range ls {
			if ch.Rate > 0 {
				l.Rate = ch.Rate
			}
			l.Faults.Loss = min(1, l.Faults.Loss+ch.Loss)
		}
	}
	return c, nil
}

// buildFatTree cables a k-ary FatTree. Edge switch e of pod p has hosts
// p·k²/4 + e·k/2 + [0, k/2); its uplink j goes to aggregation switch j of the pod;
// aggregation switch a's uplink j goes to core a·k/2 + j.
func (c *Clos) buildFatTree() error {
	n := c.Network
	k := c.cfg.K
	half := k / 2
	c.rackHosts, c.podHosts = half, half*half
	n.hops = func(a, b int) int {
		switch {
		case a/c.rackHosts == b/c.rackHosts:
			return 2
		case a/c.podHosts == b/c.podHosts:
			return 4
		}
		return 6
	}
	for i := 0; i < half*half; i++ {
		c.Core = append(c.Core, n.newSwitch(fmt.Sprintf("core%d", i), c.cfg.ECMP, 1))
	}
	for p := 0; p < k; p++ {
		var edges, aggs []*Switch
		for e := 0; e < half; e++ {
			sw := n.newSwitch(fmt.Sprintf("pod%d-edge%d", p, e), c.cfg.ECMP, 1)
			for i := 0; i < half; i++ {
				if err := n.attachHost(p*c.podHosts+e*half+i, sw); err != nil {
					return err
				}
			}
			edges = append(edges, sw)
		}
		for a := 0; a < half; a++ {
			aggs = append(aggs, n.newSwitch(fmt.Sprintf("pod%d-agg%d", p, a), c.cfg.ECMP, half))
		}
		for e, edge := range edges {
			rack := hostIPs(p*c.podHosts+e*half, half)
			for _, agg := range aggs {
				if _, _, err := n.connect(edge, agg, rack); err != nil {
					return err
				}
			}
		}
		pod := hostIPs(p*c.podHosts, c.podHosts)
		for a, agg := range aggs {
			for j := 0; j < half; j++ {
				core := a*half + j
				up, down, err := n.connect(agg, c.Core[core], pod)
				if err != nil {
					return err
				}
				c.coreLinks[[2]int{core, p}] = [2]*Link{up, down}
			}
		}
		c.Edge = append(c.Edge, edges...)
		c.Agg = append(c.Agg, aggs...)
	}
	return nil
}

// buildLeafSpine cables leaves to spines; leaf l has hosts l·HostsPerLeaf + [0, HostsPerLeaf).
func (c *Clos) buildLeafSpine() error {
	n := c.Network
	h := c.cfg.HostsPerLeaf
	c.rackHosts, c.podHosts = h, h
	n.hops = func(a, b int) int {
		if a/h == b/h {
			return 2
		}
		return 4
	}
	for s := 0; s < c.cfg.Spines; s++ {
		c.Core = append(c.Core, n.newSwitch(fmt.Sprintf("spine%d", s), c.cfg.ECMP, 1))
	}
	for l := 0; l < c.cfg.Leaves; l++ {
		leaf := n.newSwitch(fmt.Sprintf("leaf%d", l), c.cfg.ECMP, 1)
		for i := 0; i < h; i++ {
			if err := n.attachHost(l*h+i, leaf); err != nil {
				return err
			}
		}
		rack := hostIPs(l*h, h)
		for s, spine := range c.Core {
			up, down, err := n.connect(leaf, spine, rack)
			if err != nil {
				return err
			}
			c.coreLinks[[2]int{s, l}] = [2]*Link{up, down}
		}
		c.Edge = append(c.Edge, leaf)
	}
	return nil
}

// CoreLink returns the two directions of the cable between core (spine) switch core and
// pod (leaf) pod: up toward the core, down toward the pod.
func (c *Clos) CoreLink(core, pod int) (up, down *Link, ok bool) {
	ls, ok := c.coreLinks[[2]int{core, pod}]
	return ls[0], ls[1], ok
}

// Pod reports the pod (FatTree) or leaf (LeafSpine) of host i.
func (c *Clos) Pod(i int) int { return i / c.podHosts }

// Rack reports the edge switch (leaf) index of host i.
func (c *Clos) Rack(i int) int { return i / c.rackHosts }

func hostIPs(first, n int) [][4]byte {
	ips := make([][4]byte, n)
	for i := range ips {
		ips[i] = HostIP(first + i)
	}
	return ips
}

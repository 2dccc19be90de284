package sim

import (
	"fmt"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
)

// Params are what every host, link and switch port of a topology shares.
type Params struct {
	LinkRate  float64  // bits per second, both directions of every link
	LinkDelay ndp.Time // propagation delay of each link
	// Endpoint is the template for every host's endpoint; LocalMAC, LocalIP and Seed are
	// set per host. Its MTU sizes the frame buffers.
	Endpoint ndp.Config
	// Pulls is the template for every host's pull queue; LinkRate and PullBytes are
	// filled from the link and the MTU when zero.
	Pulls pullpacer.QueueConfig
	// Fabric is the template for every switch output port; Seed is set per port.
	Fabric fabric.Config
	// Detour, when set, turns on OPF at every switch: pre-credit packets meeting a
	// congested port are detoured through a neighbouring switch (fabric.Detour); Seed
	// is set per switch.
	Detour *fabric.DetourConfig
	// Faults apply to every link in both directions.
	Faults Faults
	Seed   uint64
	// CheckBytes makes the hosts carry real payload bytes and the workloads check every
	// byte received against the sender's pattern. Off, the endpoints carry lengths only
	// (ndp.Config.ZeroPayload: no payload is written, copied or checksummed) and a
	// workload checks that every byte arrived by count; frames have the same lengths
	// either way, so a run makes the same events with the same results. Links that
	// corrupt frames (Faults.Corrupt) need bytes to damage: a network with Corrupt set
	// carries them regardless.
	CheckBytes bool
	// Progress, when set, is called every ProgressEvery events of a run (a
	// command shows it to a person waiting for a long run; nil costs nothing).
	Progress      func(Progress)
	ProgressEvery uint64 // 0 means DefaultProgressEvery
}

// Progress is how far a run has got.
type Progress struct {
	Now    ndp.Time // virtual time
	Limit  ndp.Time // the run stops here if not done before
	Events uint64   // events processed so far
}

// DefaultProgressEvery is how many events pass between two Params.Progress
// calls unless Params.ProgressEvery says otherwise.
const DefaultProgressEvery = 1 << 16

// Network is a built topology: hosts, switches and the links between them. Star and
// Clos embed it; workloads and summaries only need a Network.
type Network struct {
	Sim      *Sim
	Hosts    []*Host
	Switches []*Switch
	// Links holds every link, host NICs included, in creation order.
	Links []*Link

	topology string
	p        Params
	mtu      int
	bytes    bool    // hosts carry and check payload bytes (Params.CheckBytes)
	down     []*Link // down[i] is the switch's link into host i
	ports    int     // switch ports created so far (seeds their trim coins)
	// hops reports the links on a shortest path between hosts a and b.
	hops func(a, b int) int
}

// newNetwork creates the simulator and the hosts (endpoint, pull queue, NIC link not
// yet attached to a switch).
func newNetwork(topology string, p Params, hosts int) (*Network, error) {
	if hosts < 2 {
		return nil, fmt.Errorf("sim: %s needs at least 2 hosts, got %d", topology, hosts)
	}
	if hosts > 1<<16-1 {
		return nil, fmt.Errorf("sim: %d hosts do not fit the simulator's 10.0.x.y addresses (at most 65535)", hosts)
	}
	if p.LinkRate <= 0 {
		return nil, fmt.Errorf("sim: link rate %v must be positive", p.LinkRate)
	}
	if p.Detour != nil {
		if _, err := fabric.NewDetour(*p.Detour); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	mtu := p.Endpoint.MTU
	if mtu == 0 {
		mtu = 1500
	}
	s := New(p.Seed, mtu+14+64)
	n := &Network{Sim: s, topology: topology, p: p, mtu: mtu, down: make([]*Link, hosts),
		bytes: p.CheckBytes || p.Faults.Corrupt > 0}
	if !n.bytes {
		s.shareBufs(frameSlot)
	}
	for i := 0; i < hosts; i++ {
		ec := p.Endpoint
		ec.LocalMAC, ec.LocalIP = HostMAC(i), HostIP(i)
		ec.ZeroPayload = !n.bytes
		ec.Seed = p.Seed*1000003 + uint64(i)
		ep, err := ndp.NewEndpoint(ec)
		if err != nil {
			return nil, fmt.Errorf("sim: host %d endpoint: %w", i, err)
		}
		pc := p.Pulls
		if pc.LinkRate == 0 {
			pc.LinkRate = int64(p.LinkRate)
		}
		if pc.PullBytes == 0 {
			pc.PullBytes = mtu + 14 + EthernetOverhead
		}
		pq, err := pullpacer.NewPullQueue(pc)
		if err != nil {
			return nil, fmt.Errorf("sim: host %d pull queue: %w", i, err)
		}
		h := &Host{sim: s, Index: i, EP: ep, Pulls: pq,
			Addr: ndp.Addr{MAC: ec.LocalMAC, IP: ec.LocalIP}}
		h.NIC = n.newLink(nil)
		h.NIC.srcHost = h
		n.Hosts = append(n.Hosts, h)
	}
	return n, nil
}

// newLink returns a link of the network's rate, delay and faults toward to.
func (n *Network) newLink(to node) *Link {
	l := newLink(n.Sim, n.p.LinkRate, n.p.LinkDelay, to)
	l.Faults = n.p.Faults
	n.Links = append(n.Links, l)
	return l
}

// newSwitch adds a switch. salt keys its ECMP hash, so switches spread the same flow
// independently (a real fabric seeds each switch's hash differently to avoid
// polarization).
func (n *Network) newSwitch(name string, ecmp ECMPMode, pathDiv int) *Switch {
	sw := newSwitch(n.Sim)
	sw.Name = name
	sw.ecmp = ecmp
	sw.pathDiv = max(pathDiv, 1)
	sw.salt = mix(n.p.Seed*0x9E3779B97F4A7C15 + uint64(len(n.Switches)+1))
	if n.p.Detour != nil {
		dc := *n.p.Detour
		dc.Seed = sw.salt
		sw.detour, _ = fabric.NewDetour(dc) // validated by newNetwork
	}
	n.Switches = append(n.Switches, sw)
	return sw
}

// portConfig is the fabric template with this port's trim-coin seed.
func (n *Network) portConfig() fabric.Config {
	fc := n.p.Fabric
	fc.Seed = n.p.Seed*7919 + uint64(n.ports)
	n.ports++
	return fc
}

// attachHost cables host i to sw: the host's NIC feeds sw, and a new port of sw feeds
// the host.
func (n *Network) attachHost(i int, sw *Switch) error {
	h := n.Hosts[i]
	h.NIC.setTo(sw)
	down := n.newLink(h)
	if err := sw.addPort(n.portConfig(), down, portToHost, h.Addr.IP); err != nil {
		return fmt.Errorf("sim: %s port to host %d: %w", sw.Name, i, err)
	}
	n.down[i] = down
	return nil
}

// connect cables lower to upper: lower gets an uplink port (an ECMP member) and upper a
// downlink port reaching dsts. It returns the two links (up: lower→upper, down:
// upper→lower).
func (n *Network) connect(lower, upper *Switch, dsts [][4]byte) (up, down *Link, err error) {
	up = n.newLink(upper)
	if err := lower.addPort(n.portConfig(), up, portUp); err != nil {
		return nil, nil, fmt.Errorf("sim: %s uplink: %w", lower.Name, err)
	}
	down = n.newLink(lower)
	if err := upper.addPort(n.portConfig(), down, portDown, dsts...); err != nil {
		return nil, nil, fmt.Errorf("sim: %s downlink: %w", upper.Name, err)
	}
	return up, down, nil
}

// DownLink returns the link into host i (the last hop).
func (n *Network) DownLink(i int) *Link { return n.down[i] }

// Hops reports the number of links on a shortest path from host a to host b.
func (n *Network) Hops(a, b int) int { return n.hops(a, b) }

// CheckBytes reports whether the hosts carry payload bytes and workloads check them
// (Params.CheckBytes).
func (n *Network) CheckBytes() bool { return n.bytes }

// MTU is the hosts' IPv4 MTU.
func (n *Network) MTU() int { return n.mtu }

// OneWay is the delay a packet of size frame bytes sees from host a to host b on an idle
// network, minus its serialization on the last link: store-and-forward serialization on
// every link but the last, plus every link's propagation delay.
func (n *Network) OneWay(a, b, size int) ndp.Time {
	links := ndp.Time(n.hops(a, b))
	return (links-1)*n.Hosts[a].NIC.SerializationTime(size) + links*n.p.LinkDelay
}

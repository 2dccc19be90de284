package sim

import (
	"fmt"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
)

// StarConfig describes N hosts on one switch, every link alike.
type StarConfig struct {
	Hosts     int
	LinkRate  float64  // bits per second, both directions of every link
	LinkDelay ndp.Time // propagation delay of each link
	// Endpoint is the template for every host's endpoint; LocalMAC and LocalIP are set
	// per host. Its MTU sizes the frame buffers.
	Endpoint ndp.Config
	// Pulls is the template for every host's pull queue; LinkRate and PullBytes are
	// filled from the link and the MTU when zero.
	Pulls  pullpacer.QueueConfig
	Fabric fabric.Config
	// Faults apply to every link in both directions.
	Faults Faults
	Seed   uint64
}

// Star is a built star topology.
type Star struct {
	Sim    *Sim
	Hosts  []*Host
	Switch *Switch
	cfg    StarConfig
	mtu    int
}

// HostIP is the simulated IPv4 address of host i. It exists only inside the simulator.
func HostIP(i int) [4]byte { return [4]byte{10, 0, byte(i >> 8), byte(i + 1)} }

// HostMAC is the simulated MAC address of host i.
func HostMAC(i int) [6]byte { return [6]byte{0x02, 0, 0, 0, byte(i >> 8), byte(i)} }

// NewStar builds the topology. Hosts have no App until the caller sets one.
func NewStar(cfg StarConfig) (*Star, error) {
	if cfg.Hosts < 2 {
		return nil, fmt.Errorf("sim: star needs at least 2 hosts, got %d", cfg.Hosts)
	}
	if cfg.LinkRate <= 0 {
		return nil, fmt.Errorf("sim: link rate %v must be positive", cfg.LinkRate)
	}
	mtu := cfg.Endpoint.MTU
	if mtu == 0 {
		mtu = 1500
	}
	s := New(cfg.Seed, mtu+14+64)
	st := &Star{Sim: s, Switch: newSwitch(s), cfg: cfg, mtu: mtu}
	for i := 0; i < cfg.Hosts; i++ {
		ec := cfg.Endpoint
		ec.LocalMAC, ec.LocalIP = HostMAC(i), HostIP(i)
		ec.Seed = cfg.Seed*1000003 + uint64(i)
		ep, err := ndp.NewEndpoint(ec)
		if err != nil {
			return nil, fmt.Errorf("sim: host %d endpoint: %w", i, err)
		}
		pc := cfg.Pulls
		if pc.LinkRate == 0 {
			pc.LinkRate = int64(cfg.LinkRate)
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
		h.NIC = newLink(s, cfg.LinkRate, cfg.LinkDelay, st.Switch)
		h.NIC.Faults = cfg.Faults
		h.NIC.source = h.nextFrame
		down := newLink(s, cfg.LinkRate, cfg.LinkDelay, h)
		down.Faults = cfg.Faults
		fc := cfg.Fabric
		fc.Seed = cfg.Seed*7919 + uint64(i)
		if err := st.Switch.addPort(fc, down, ec.LocalIP); err != nil {
			return nil, fmt.Errorf("sim: switch port %d: %w", i, err)
		}
		st.Hosts = append(st.Hosts, h)
	}
	return st, nil
}

// DownLink returns the switch's link toward host i.
func (st *Star) DownLink(i int) *Link { return st.Switch.links[i] }

// BaseOneWay is the delay a packet of n frame bytes sees from host to host on an idle
// network, minus its serialization on the receiver's link: sender serialization plus
// both propagation delays.
func (st *Star) BaseOneWay(n int) ndp.Time {
	return st.Hosts[0].NIC.SerializationTime(n) + 2*st.cfg.LinkDelay
}

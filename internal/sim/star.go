package sim

import (
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
	// CheckBytes: Params.CheckBytes.
	CheckBytes bool
	// Progress, when set, is called every ProgressEvery events of a run.
	Progress      func(Progress)
	ProgressEvery uint64 // 0 means DefaultProgressEvery
}

// Params returns the host, link and port parameters of the star, for building another
// topology with the same ones.
func (c StarConfig) Params() Params {
	return Params{LinkRate: c.LinkRate, LinkDelay: c.LinkDelay, Endpoint: c.Endpoint,
		Pulls: c.Pulls, Fabric: c.Fabric, Faults: c.Faults, Seed: c.Seed, CheckBytes: c.CheckBytes, Progress: c.Progress, ProgressEvery: c.ProgressEvery}
}

// Star is a built star topology.
type Star struct {
	*Network
	Switch *Switch
	cfg    StarConfig
}

// HostIP is the simulated IPv4 address of host i. It exists only inside the simulator.
func HostIP(i int) [4]byte { return [4]byte{10, 0, byte(i >> 8), byte(i + 1)} }

// hostIndex is the host whose HostIP is ip.
func hostIndex(ip [4]byte) (int, bool) {
	if ip[0] != 10 || ip[1] != 0 {
		return 0, false
	}
	return int(ip[2])<<8 | int(ip[3]-1), true
}

// HostMAC is the simulated MAC address of host i.
func HostMAC(i int) [6]byte { return [6]byte{0x02, 0, 0, 0, byte(i >> 8), byte(i)} }

// NewStar builds the topology. Hosts have no App until the caller sets one.
func NewStar(cfg StarConfig) (*Star, error) {
	n, err := newNetwork("star", cfg.Params(), cfg.Hosts)
	if err != nil {
		return nil, err
	}
	st := &Star{Network: n, Switch: n.newSwitch("switch", ECMPHash, 1), cfg: cfg}
	n.hops = func(a, b int) int { return 2 }
	for i := range n.Hosts {
		if err := n.attachHost(i, st.Switch); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// BaseOneWay is the delay a packet of n frame bytes sees from host to host on an idle
// network, minus its serialization on the receiver's link: sender serialization plus
// both propagation delays.
func (st *Star) BaseOneWay(n int) ndp.Time { return st.OneWay(0, 1, n) }

package sim

import (
	"encoding/binary"
	"fmt"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// ECMPMode is how a switch picks one of its uplinks for a frame whose destination is
// not below it.
type ECMPMode uint8

const (
	// ECMPHash hashes the frame's 5-tuple (IPv4 addresses, protocol, UDP ports) with a
	// per-switch salt, as a commodity switch does. NDP varies the UDP source port per
	// packet (docs/wire.md "Paths"), so a connection's packets spread over the uplinks
	// its ports hash to: per-packet ECMP, deterministic per port.
	ECMPHash ECMPMode = iota
	// ECMPPath reads the path index the sender chose from the UDP source port's low 14
	// bits and uses it as a label: switch level L takes digit L of the index in base
	// (uplinks per switch). With Endpoint.Paths equal to the topology's path count, a
	// connection's ports cover every core switch exactly once per permutation round:
	// the paper's sender-chosen paths (section 3.1.1, label-switched paths).
	ECMPPath
	// ECMPRandom picks an uplink at random for every frame (the paper's "switches
	// load-balance" comparison in section 3.2: per-packet random ECMP).
	ECMPRandom
)

// ParseECMPMode parses "hash", "path" or "random".
func ParseECMPMode(s string) (ECMPMode, error) {
	switch s {
	case "hash", "":
		return ECMPHash, nil
	case "path":
		return ECMPPath, nil
	case "random":
		return ECMPRandom, nil
	}
	return 0, fmt.Errorf("sim: unknown ECMP mode %q (want hash, path or random)", s)
}

func (m ECMPMode) String() string {
	switch m {
	case ECMPHash:
		return "hash"
	case ECMPPath:
		return "path"
	case ECMPRandom:
		return "random"
	}
	return fmt.Sprintf("ECMPMode(%d)", uint8(m))
}

// portKind says where an output port's link goes.
type portKind uint8

const (
	portToHost portKind = iota // last hop: the link into a host
	portUp                     // toward the core (an ECMP member)
	portDown                   // from a higher tier toward the hosts
)

// Switch forwards frames by destination IPv4 address to one fabric.Port per output
// link. A destination it has no route for goes up one of its uplinks, chosen per frame
// by its ECMP mode.
type Switch struct {
	Name   string
	sim    *Sim
	ports  []*fabric.Port
	links  []*Link
	kinds  []portKind
	routes []int32 // routes[hostIndex(dst)] is the port reaching dst, -1 for none
	up     []int   // uplink ports, the ECMP group

	ecmp    ECMPMode
	salt    uint64
	pathDiv int // ECMPPath: this level's digit of the path index is (index / pathDiv) % len(up)

	// Unroutable counts frames whose destination no port reaches (and unparseable ones).
	Unroutable uint64

	probe     *QueueProbe // samples the queueing delay at port probePort, when set
	probePort int

	detour      *fabric.Detour // OPF, when enabled
	detourPorts []int          // ports toward other switches: OPF's detour candidates
}

// Detour returns the switch's OPF forwarding state (nil when OPF is off).
func (sw *Switch) Detour() *fabric.Detour { return sw.detour }

// QueueProbe records the queueing delay each arriving data frame will see at one switch
// port: the bytes queued ahead of it (data and header queues) plus the rest of the
// frame on the wire, at the link's rate. Frames arriving before From are not sampled.
type QueueProbe struct {
	From ndp.Time
	// DelaysUs holds one sample per data frame, in microseconds.
	DelaysUs []float64
}

// Probe makes p sample the queueing delay at output port i (nil stops it).
func (sw *Switch) Probe(i int, p *QueueProbe) { sw.probe, sw.probePort = p, i }

func (sw *Switch) sampleQueue(i int, f []byte) {
	now := sw.sim.now
	if now < sw.probe.From || !ndp.IsTrimmable(f) {
		return
	}
	l := sw.links[i]
	d, h := sw.ports[i].Bytes()
	wait := float64(d+h) * 8 / l.Rate * 1e9
	if l.busy && l.stats.LastEnd > now {
		wait += float64(l.stats.LastEnd - now)
	}
	sw.probe.DelaysUs = append(sw.probe.DelaysUs, wait/1e3)
}

func newSwitch(s *Sim) *Switch {
	return &Switch{sim: s, pathDiv: 1}
}

// addPort adds an output port of the given kind whose link reaches the hosts in dsts.
// Uplink ports join the ECMP group.
func (sw *Switch) addPort(cfg fabric.Config, l *Link, kind portKind, dsts ...[4]byte) error {
	p, err := fabric.NewPort(cfg)
	if err != nil {
		return err
	}
	i := len(sw.ports)
	sw.ports = append(sw.ports, p)
	sw.links = append(sw.links, l)
	sw.kinds = append(sw.kinds, kind)
	l.srcPort = p
	if kind == portUp {
		sw.up = append(sw.up, i)
	}
	if kind != portToHost {
		sw.detourPorts = append(sw.detourPorts, i)
	}
	for _, d := range dsts {
		h, ok := hostIndex(d)
		if !ok {
			return fmt.Errorf("sim: %d.%d.%d.%d is not a simulated host address", d[0], d[1], d[2], d[3])
		}
		for len(sw.routes) <= h {
			sw.routes = append(sw.routes, -1)
		}
		sw.routes[h] = int32(i)
	}
	return nil
}

// Port returns output port i.
func (sw *Switch) Port(i int) *fabric.Port { return sw.ports[i] }

// Link returns the link output port i feeds.
func (sw *Switch) Link(i int) *Link { return sw.links[i] }

// Ports reports the number of output ports.
func (sw *Switch) Ports() int { return len(sw.ports) }

// Uplinks returns the indexes of the ports in the ECMP group.
func (sw *Switch) Uplinks() []int { return sw.up }

func (sw *Switch) receive(f []byte) { sw.forward(f, 0) }

// route returns the output port for f.
func (sw *Switch) route(f []byte) (int, bool) {
	dst, ok := ndp.FrameDst(f)
	if !ok {
		return 0, false
	}
	if h, ok := hostIndex(dst); ok && h < len(sw.routes) && sw.routes[h] >= 0 {
		return int(sw.routes[h]), true
	}
	if len(sw.up) == 0 {
		return 0, false
	}
	return sw.up[sw.pick(f)], true
}

// pick chooses an uplink for f (an index into sw.up).
func (sw *Switch) pick(f []byte) int {
	n := len(sw.up)
	if n == 1 {
		return 0
	}
	switch sw.ecmp {
	case ECMPRandom:
		return sw.sim.rng.IntN(n)
	case ECMPPath:
		if len(f) < 38 {
			return 0
		}
		path := int(binary.BigEndian.Uint16(f[34:]) & 0x3FFF)
		return path / sw.pathDiv % n
	}
	return int(ecmpHash(f, sw.salt) % uint64(n))
}

// ecmpHash hashes the IPv4 5-tuple of f (addresses, protocol, UDP ports) with salt.
// Frames too short to carry them hash their available prefix as zeros.
func ecmpHash(f []byte, salt uint64) uint64 {
	var ips, ports uint64
	if len(f) >= 38 {
		ips = uint64(binary.BigEndian.Uint32(f[26:]))<<32 | uint64(binary.BigEndian.Uint32(f[30:]))
		ports = uint64(f[23])<<32 | uint64(binary.BigEndian.Uint32(f[34:]))
	}
	return mix(mix(ips^salt) ^ ports)
}

func (sw *Switch) forward(f []byte, depth int) {
	i, routed := sw.route(f)
	if !routed || depth > 1 {
		sw.Unroutable++
		sw.sim.putBuf(f)
		return
	}
	if sw.detour != nil && len(sw.detourPorts) > 1 {
		i = sw.detour.Route(f, i, sw.ports, sw.detourPorts)
	}
	if sw.probe != nil && i == sw.probePort {
		sw.sampleQueue(i, f)
	}
	v, out, bounced, dropped := sw.ports[i].Enqueue(f, sw.sim.now)
	switch v {
	case fabric.Bounced:
		sw.forward(out, depth+1)
	case fabric.Dropped:
		// A header trimmed upstream that overflows this port's header queue is returned
		// to its sender too (fabric.Port.ReturnToSender), not dropped.
		if sw.ports[i].ReturnToSender(out) {
			sw.forward(out, depth+1)
		} else {
			sw.sim.putBuf(out)
		}
	}
	if bounced != nil {
		sw.forward(bounced, depth+1)
	}
	if dropped != nil {
		sw.sim.putBuf(dropped)
	}
	sw.links[i].kick()
}

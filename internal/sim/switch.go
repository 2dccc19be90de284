package sim

import (
	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// Switch forwards frames by destination IPv4 address to one fabric.Port per output link.
type Switch struct {
	sim    *Sim
	ports  []*fabric.Port
	links  []*Link
	routes map[[4]byte]int
	// Unroutable counts frames whose destination no port reaches (and unparseable ones).
	Unroutable uint64
}

func newSwitch(s *Sim) *Switch {
	return &Switch{sim: s, routes: map[[4]byte]int{}}
}

// addPort adds an output port whose link reaches the hosts in dsts.
func (sw *Switch) addPort(cfg fabric.Config, l *Link, dsts ...[4]byte) error {
	p, err := fabric.NewPort(cfg)
	if err != nil {
		return err
	}
	i := len(sw.ports)
	sw.ports = append(sw.ports, p)
	sw.links = append(sw.links, l)
	l.source = func(now ndp.Time) ([]byte, bool) { return p.Dequeue(now) }
	for _, d := range dsts {
		sw.routes[d] = i
	}
	return nil
}

// Port returns output port i.
func (sw *Switch) Port(i int) *fabric.Port { return sw.ports[i] }

// Ports reports the number of output ports.
func (sw *Switch) Ports() int { return len(sw.ports) }

func (sw *Switch) receive(f []byte) { sw.forward(f, 0) }

func (sw *Switch) forward(f []byte, depth int) {
	dst, ok := ndp.FrameDst(f)
	i, routed := sw.routes[dst]
	if !ok || !routed || depth > 1 {
		sw.Unroutable++
		sw.sim.putBuf(f)
		return
	}
	v, out, bounced, dropped := sw.ports[i].Enqueue(f, sw.sim.now)
	switch v {
	case fabric.Bounced:
		sw.forward(out, depth+1)
	case fabric.Dropped:
		sw.sim.putBuf(out)
	}
	if bounced != nil {
		sw.forward(bounced, depth+1)
	}
	if dropped != nil {
		sw.sim.putBuf(dropped)
	}
	sw.links[i].kick()
}

package softswitch

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// Star is K hosts on one software switch: every host namespace has one veth
// whose peer is a port of the switch, which runs in a namespace of its own.
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

var starSubnet atomic.Uint32

// NewStar builds the star on tb, opens the switch inside its namespace and
// starts it. Host i has address 10.<n>.0.<i+1>/24 for a per-process n. tb.Close
// stops the switch before it deletes the namespaces.
func NewStar(tb *testbed.Testbed, cfg StarConfig) (*Star, error) {
	if cfg.Hosts < 2 || cfg.Hosts > maxPorts {
		return nil, fmt.Errorf("%w: %d hosts, want 2..%d", ErrConfig, cfg.Hosts, maxPorts)
	}
	swNS, err := tb.NewNamespace()
	if err != nil {
		return nil, err
	}
	n := 100 + (uint32(os.Getpid())+starSubnet.Add(1))%100
	st := &Star{NS: swNS}
	var ports []string
	for i := 0; i < cfg.Hosts; i++ {
		ns, err := tb.NewNamespace()
		if err != nil {
			return nil, err
		}
		v, err := tb.NewVeth(ns, swNS, testbed.VethConfig{AddrA: fmt.Sprintf("10.%d.0.%d/24", n, i+1), MTU: cfg.MTU, NoTxChecksum: true})
		if err != nil {
			return nil, err
		}
		st.Hosts = append(st.Hosts, StarHost{NS: ns, Link: v.A, Port: v.B.Name})
		ports = append(ports, v.B.Name)
	}
	sc := cfg.Switch
	sc.Ports = ports
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

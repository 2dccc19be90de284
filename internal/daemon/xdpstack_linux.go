package daemon

import (
	"fmt"

	"github.com/ndpstack/ndpstack/internal/engine"
)

// xdpResolvers is how many neighbour resolutions an OpenXDPStack daemon runs
// at once (one kernel resolver and worker goroutine each): a dial to an
// address nobody answers holds one for up to EngineTransportConfig.DialTimeout.
const xdpResolvers = 4

// OpenXDPStack opens what a daemon serves applications from: an engine stack on one
// AF_XDP queue (xc), with no background poller, its events feeding the returned
// EngineTransport (tc), which is bound to it and sleeps on the queue's XSK fd.
// Neighbours are resolved from the kernel's table off the core loop: unless
// tc.Resolvers is set, xdpResolvers kernel resolvers are opened here (in the calling
// thread's network namespace). ec's Link, Resolver, NoBackground and OnEvent are set
// here. Closing the stack closes the link and the resolvers.
func OpenXDPStack(xc engine.XDPConfig, ec engine.Config, tc EngineTransportConfig) (*engine.Stack, *EngineTransport, error) {
	sts, trs, err := OpenXDPStacks(xc, []int{xc.Queue}, ec, tc)
	if err != nil {
		return nil, nil, err
	}
	return sts[0], trs[0], nil
}

// OpenXDPStacks is OpenXDPStack for several queues of one interface: one
// stack and transport per queue (each over its own AF_XDP socket and UMEM,
// engine.OpenXDPEach), for one core loop each. tc.Resolvers, when set, go
// to the first queue; every other queue opens its own kernel resolvers.
func OpenXDPStacks(xc engine.XDPConfig, queues []int, ec engine.Config, tc EngineTransportConfig) ([]*engine.Stack, []*EngineTransport, error) {
	links, err := engine.OpenXDPEach(xc, queues)
	if err != nil {
		return nil, nil, err
	}
	var sts []*engine.Stack
	var trs []*EngineTransport
	for i, link := range links {
		st, tr, err := openXDPStack(link, ec, tc)
		if err != nil {
			for _, st := range sts {
				st.Close()
			}
			for _, l := range links[i:] {
				l.Close()
			}
			return nil, nil, fmt.Errorf("queue %d: %w", queues[i], err)
		}
		sts, trs = append(sts, st), append(trs, tr)
		tc.Resolvers = nil
	}
	return sts, trs, nil
}

// openXDPStack builds one queue's stack and transport over link (closed on
// an error).
func openXDPStack(link *engine.XDPLink, ec engine.Config, tc EngineTransportConfig) (*engine.Stack, *EngineTransport, error) {
	var opened []engine.Resolver
	closeOpened := func() {
		for _, r := range opened {
			r.(*engine.KernelResolver).Close()
		}
	}
	if len(tc.Resolvers) == 0 {
		for range xdpResolvers {
			res, err := engine.NewKernelResolver(link.Ifindex(), link.Name())
			if err != nil {
				closeOpened()
				link.Close()
				return nil, nil, err
			}
			opened = append(opened, res)
		}
		tc.Resolvers = opened
	}
	tr := NewEngineTransport(tc)
	ec.Link, ec.Resolver, ec.NoBackground, ec.OnEvent = link, tr.Resolver(), true, tr.OnEvent
	st, err := engine.New(ec)
	if err != nil {
		tr.neigh.Close() // stops the workers, closes the resolvers
		link.Close()
		return nil, nil, err
	}
	xsk := -1
	if qs := link.Port().Queues(); len(qs) > 0 {
		xsk = qs[0].FD()
	}
	tr.Bind(st, xsk)
	return st, tr, nil
}

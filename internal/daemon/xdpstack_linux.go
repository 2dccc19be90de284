package daemon

import "github.com/ndpstack/ndpstack/internal/engine"

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
	link, err := engine.OpenXDP(xc)
	if err != nil {
		return nil, nil, err
	}
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

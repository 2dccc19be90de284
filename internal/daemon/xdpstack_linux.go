package daemon

import "github.com/ndpstack/ndpstack/internal/engine"

// OpenXDPStack opens what a daemon serves applications from: an engine stack on one
// AF_XDP queue (xc), with the kernel's neighbour table as resolver and no background
// poller, its events feeding the returned EngineTransport, which is bound to it and
// sleeps on the queue's XSK fd. ec's Link, Resolver, NoBackground and OnEvent are set
// here. Closing the stack closes the link and the resolver.
func OpenXDPStack(xc engine.XDPConfig, ec engine.Config) (*engine.Stack, *EngineTransport, error) {
	link, err := engine.OpenXDP(xc)
	if err != nil {
		return nil, nil, err
	}
	res, err := engine.NewKernelResolver(link.Ifindex(), link.Name())
	if err != nil {
		link.Close()
		return nil, nil, err
	}
	tr := NewEngineTransport(EngineTransportConfig{})
	ec.Link, ec.Resolver, ec.NoBackground, ec.OnEvent = link, res, true, tr.OnEvent
	st, err := engine.New(ec)
	if err != nil {
		res.Close()
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

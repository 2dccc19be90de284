package sockapi

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/ndpstack/ndpstack/internal/capture"
	"github.com/ndpstack/ndpstack/internal/engine"
)

// Open starts an embedded NDP stack on cfg.Interface: an AF_XDP socket on
// cfg.Queue with the XDP steering program (only NDP's UDP port is taken from
// the kernel; ARP and everything else still reach it), the kernel's
// neighbour table for MAC resolution, and the engine's core loop run by the
// goroutines that wait on the stack. It needs CAP_NET_ADMIN and
// CAP_NET_RAW, and must be called in the interface's network namespace.
func Open(cfg Config) (*Stack, error) {
	if cfg.Interface == "" {
		return nil, fmt.Errorf("%w: Interface is required", ErrInvalidConfig)
	}
	if !cfg.Address.IsValid() {
		ip, err := firstIPv4(cfg.Interface)
		if err != nil {
			return nil, err
		}
		cfg.Address = ip
	}
	link, err := engine.OpenXDP(engine.XDPConfig{Interface: cfg.Interface, Queue: cfg.Queue, UDPPort: cfg.UDPPort,
		MTU: cfg.MTU, RuntimeWait: cfg.Spin < 0, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	res, err := engine.NewKernelResolver(link.Ifindex(), link.Name())
	if err != nil {
		link.Close()
		return nil, err
	}
	var cw *capture.Writer
	if cfg.CaptureFile != "" {
		if cw, err = capture.Create(cfg.CaptureFile, capture.Config{MaxBytes: cfg.CaptureMaxBytes, Name: cfg.Interface}); err != nil {
			link.Close()
			res.Close()
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	ec, err := cfg.engineConfig(link, res)
	if err == nil {
		ec.Capture = cw
		var s *engine.Stack
		if s, err = engine.New(ec); err == nil {
			return newStack(&embedded{s: s, capture: cw}), nil
		}
	}
	link.Close()
	res.Close()
	if cw != nil {
		cw.Close()
	}
	return nil, err
}

func firstIPv4(name string) (netip.Addr, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("sockapi: interface %q: %w", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("sockapi: addresses of %q: %w", name, err)
	}
	for _, a := range addrs {
		if pn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(pn.IP.To4()); ok && pn.IP.To4() != nil {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: interface %q has no IPv4 address (set Config.Address)", ErrInvalidConfig, name)
}

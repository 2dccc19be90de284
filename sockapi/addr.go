package sockapi

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// Addr is an NDP address: IPv4 address and NDP port. It implements net.Addr
// with network "ndp".
type Addr struct {
	IP   netip.Addr
	Port uint16
}

// Network implements net.Addr.
func (a Addr) Network() string { return "ndp" }

// String implements net.Addr ("10.0.0.2:7").
func (a Addr) String() string { return netip.AddrPortFrom(a.IP, a.Port).String() }

// ParseAddr parses "ip:port" (IPv4 only).
func ParseAddr(s string) (Addr, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		host, port, serr := net.SplitHostPort(s)
		if serr != nil {
			return Addr{}, fmt.Errorf("sockapi: address %q: %w", s, err)
		}
		ip, ierr := netip.ParseAddr(host)
		p, perr := strconv.ParseUint(port, 10, 16)
		if ierr != nil || perr != nil {
			return Addr{}, fmt.Errorf("sockapi: address %q: %w", s, err)
		}
		ap = netip.AddrPortFrom(ip, uint16(p))
	}
	ip := ap.Addr().Unmap()
	if !ip.Is4() {
		return Addr{}, fmt.Errorf("sockapi: address %q: NDP runs over IPv4 only", s)
	}
	if ap.Port() == 0 {
		return Addr{}, fmt.Errorf("sockapi: address %q: port 0", s)
	}
	return Addr{IP: ip, Port: ap.Port()}, nil
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
)

// ErrNoNeighbor: the IPv4 address could not be resolved to a MAC address
// (the kernel's ARP resolution failed or timed out).
var ErrNoNeighbor = errors.New("engine: neighbor unreachable (no ARP entry)")

// Resolver maps next-hop IPv4 addresses to MAC addresses. The Stack calls it
// only on Dial, when its own cache has no fresh entry, never per packet.
type Resolver interface {
	// Resolve returns ip's MAC address, asking the network if needed; it
	// may block until ctx is done.
	Resolve(ctx context.Context, ip [4]byte) ([6]byte, error)
}

// StaticResolver is a fixed table, for in-memory links and the simulator.
type StaticResolver map[[4]byte][6]byte

// Resolve implements Resolver.
func (r StaticResolver) Resolve(_ context.Context, ip [4]byte) ([6]byte, error) {
	if mac, ok := r[ip]; ok {
		return mac, nil
	}
	return [6]byte{}, fmt.Errorf("%w: %v", ErrNoNeighbor, netip.AddrFrom4(ip))
}

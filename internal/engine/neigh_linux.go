package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// KernelResolver reads the kernel's neighbour table (RTM_GETNEIGH over
// rtnetlink) for one interface, and when an address has no usable entry it
// makes the kernel resolve it: a zero-length UDP datagram to the discard
// port (9) from a kernel socket bound to the interface triggers ARP, and the
// table is read again until the entry turns up or ctx ends. The datagram
// only ever goes to the address being resolved, which is the peer the
// caller is about to talk to anyway. No MAC address is configured by hand.
//
// Both sockets are opened by NewKernelResolver in the calling thread's
// network namespace and stay there.
type KernelResolver struct {
	ifindex int
	nl      int // NETLINK_ROUTE socket
	udp     int // probe socket
	seq     uint32
	buf     []byte
}

// NewKernelResolver opens the netlink and probe sockets for interface ifindex.
func NewKernelResolver(ifindex int, ifname string) (*KernelResolver, error) {
	nl, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("engine: netlink socket: %w", err)
	}
	if err := unix.Bind(nl, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(nl)
		return nil, fmt.Errorf("engine: netlink bind: %w", err)
	}
	udp, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		unix.Close(nl)
		return nil, fmt.Errorf("engine: probe socket: %w", err)
	}
	if ifname != "" {
		if err := unix.BindToDevice(udp, ifname); err != nil {
			unix.Close(nl)
			unix.Close(udp)
			return nil, fmt.Errorf("engine: probe socket SO_BINDTODEVICE %s: %w", ifname, err)
		}
	}
	return &KernelResolver{ifindex: ifindex, nl: nl, udp: udp, buf: make([]byte, 1<<16)}, nil
}

// Close closes both sockets.
func (r *KernelResolver) Close() error {
	unix.Close(r.udp)
	return unix.Close(r.nl)
}

// Resolve implements Resolver. Not safe for concurrent use (the Stack
// serialises calls).
func (r *KernelResolver) Resolve(ctx context.Context, ip [4]byte) ([6]byte, error) {
	probed := false
	wait := 50 * time.Microsecond
	// Give up at ctx's deadline, or after 3 s (the kernel's default ARP
	// retries: 3 solicitations a second apart) when ctx has none.
	deadline := time.Now().Add(3 * time.Second)
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	for {
		mac, ok, err := r.lookup(ip)
		if err != nil {
			return mac, err
		}
		if ok {
			return mac, nil
		}
		if !probed || wait >= 20*time.Millisecond {
			// Ask the kernel to resolve: a UDP datagram makes it send ARP.
			_ = unix.Sendto(r.udp, nil, unix.MSG_DONTWAIT, &unix.SockaddrInet4{Port: 9, Addr: ip})
			probed = true
		}
		if time.Now().After(deadline) {
			return mac, fmt.Errorf("%w: %v on ifindex %d (ARP timed out)", ErrNoNeighbor, netip.AddrFrom4(ip), r.ifindex)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return mac, fmt.Errorf("%w: %v: %w", ErrNoNeighbor, netip.AddrFrom4(ip), ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// usableNUD are neighbour states whose link-layer address may be used.
const usableNUD = unix.NUD_REACHABLE | unix.NUD_STALE | unix.NUD_DELAY | unix.NUD_PROBE | unix.NUD_PERMANENT | unix.NUD_NOARP

// lookup dumps the IPv4 neighbour table and returns ip's entry on r.ifindex.
func (r *KernelResolver) lookup(ip [4]byte) ([6]byte, bool, error) {
	var mac [6]byte
	r.seq++
	req := make([]byte, unix.SizeofNlMsghdr+unix.SizeofNdMsg)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETNEIGH)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], r.seq)
	req[unix.SizeofNlMsghdr] = unix.AF_INET // ndm_family
	if err := unix.Sendto(r.nl, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return mac, false, fmt.Errorf("engine: RTM_GETNEIGH: %w", err)
	}
	var found bool
	for {
		n, _, err := unix.Recvfrom(r.nl, r.buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return mac, false, fmt.Errorf("engine: netlink recv: %w", err)
		}
		m, ok, done, err := parseNeighDump(r.buf[:n], r.seq, r.ifindex, ip)
		if err != nil {
			return mac, false, err
		}
		if ok && !found {
			mac, found = m, true
		}
		if done {
			return mac, found, nil
		}
	}
}

// parseNeighDump reads one datagram of an RTM_GETNEIGH dump answering
// request seq: it returns ip's usable entry on ifindex if the datagram holds
// it, and whether the dump ended. Malformed input is an error, never a panic.
func parseNeighDump(b []byte, seq uint32, ifindex int, ip [4]byte) (mac [6]byte, found, done bool, err error) {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return mac, false, false, fmt.Errorf("engine: netlink parse: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Seq != seq {
			continue
		}
		switch m.Header.Type {
		case unix.NLMSG_DONE:
			return mac, found, true, nil
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					return mac, false, true, fmt.Errorf("engine: RTM_GETNEIGH: %w", syscall.Errno(-e))
				}
			}
			return mac, found, true, nil
		case unix.RTM_NEWNEIGH:
			if found || len(m.Data) < unix.SizeofNdMsg {
				continue
			}
			idx := int32(binary.NativeEndian.Uint32(m.Data[4:]))
			state := binary.NativeEndian.Uint16(m.Data[8:])
			if int(idx) != ifindex || state&usableNUD == 0 {
				continue
			}
			// syscall.ParseNetlinkRouteAttr does not know RTM_NEWNEIGH:
			// walk the rtattrs after the ndmsg by hand.
			var dst, ll []byte
			for a := m.Data[unix.SizeofNdMsg:]; len(a) >= 4; {
				alen := int(binary.NativeEndian.Uint16(a[0:]))
				if alen < 4 || alen > len(a) {
					break
				}
				switch binary.NativeEndian.Uint16(a[2:]) {
				case unix.NDA_DST:
					dst = a[4:alen]
				case unix.NDA_LLADDR:
					ll = a[4:alen]
				}
				a = a[min((alen+3)&^3, len(a)):]
			}
			if len(dst) == 4 && [4]byte(dst) == ip && len(ll) == 6 {
				mac, found = [6]byte(ll), true
			}
		}
	}
	return mac, found, false, nil
}

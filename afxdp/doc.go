// Package afxdp owns the NIC side of ndpstack: AF_XDP sockets on one or more
// queues of an interface, over one UMEM that application processes can map
// too, and the XDP program that steers NDP's UDP port to those sockets.
//
// # Objects
//
//	Port   one interface: a UMEM, one Queue per configured queue id, the
//	       steering program and its XSKMAP, attached through a bpf_link.
//	UMEM   NumFrames frames of FrameSize (2048/4096) bytes in a memfd mapped
//	       MAP_SHARED. FD/DupFD hand the memfd to another process, which maps
//	       the same pages: this is how the shared buffer pool is zero-copy.
//	Queue  one AF_XDP socket bound to (interface, queue id) with four rings.
//
// # The rings
//
// Each socket has four single-producer/single-consumer rings shared with the
// kernel through mmap. Two carry UMEM addresses (u64), two carry descriptors
// (addr, len, options):
//
//	          userspace produces              kernel produces
//	RX side:  fill ring (free frames)  ──▶   RX ring (received descriptors)
//	TX side:  TX ring (descriptors)    ──▶   completion ring (sent frames)
//
// A frame goes around like this:
//
//	free list ──refill──▶ fill ring ──kernel writes a packet──▶ RX ring
//	    ▲                                                        │ Receive
//	    │ Release                                                ▼
//	    ├──────────────────────────────────────────────────── application
//	    │                                                        │ Transmit
//	    │ Complete (reaped inside Transmit)                      ▼
//	    └──────── completion ring ◀──kernel sent it── TX ring ◀──┘
//	                                     Alloc: free list ──▶ application
//
// The free list keeps the frames back from transmission apart: Alloc takes
// those first and refills take them last, so a transmit buffer is a frame
// only this socket's thread and its sendto touched, not one whose lines the
// peer's CPU last wrote (copy mode delivers into the receiver's UMEM inside
// the sender's sendto).
//
// Ring indices are free-running u32 counters (slot = index & (size-1)).
// The producer writes slots, then publishes with a release store of its
// index; the consumer reads the other side's index with an acquire load,
// reads slots, then releases them with a release store of its own index.
// This is the contract in the kernel's net/xdp/xsk_queue.h (see the
// comment in ring_unsafe.go, which quotes it); sync/atomic provides it. Each
// side caches the other's index so the shared cache line is touched only
// when the ring looks full or empty.
//
// # Frame ownership
//
// A frame index is a token held by exactly one party: the free list, the
// fill ring (or the kernel, for RX), the application, or the TX path (TX
// ring, kernel, completion ring). Every move goes through a ledger that
// checks the giver holds the frame: a double Release, a Transmit of a frame
// the application does not hold, or a kernel descriptor for a frame never
// put on a fill ring is refused with a *FrameError and counted. When the port
// is quiescent, UMEM.Accounting().Check() proves that every frame came back.
//
// # Wakeups
//
// Sockets bind with XDP_USE_NEED_WAKEUP when the kernel has it. Transmit
// makes a sendto only when the TX ring's need_wakeup flag is set (always in
// copy mode, which transmits inside that syscall; rarely in zero-copy mode,
// where the driver polls the ring). Receive makes a recvfrom only when
// nothing arrived and the fill ring's flag is set. A busy-polling loop thus
// makes no syscall per batch when the kernel does not need one; an adaptive
// loop sleeps in Queue.Wait (poll(2) on the socket) when idle.
//
// # Multi-buffer
//
// With Config.MultiBuffer the sockets bind with XDP_USE_SG and the program
// is loaded with BPF_F_XDP_HAS_FRAGS, so a packet larger than a frame is a
// chain of descriptors, every one but the last with XDP_PKT_CONTD in
// Options, on the RX ring (each fragment in its own frame, after the XDP
// headroom) and on the TX ring (each descriptor inside one frame).
// Receive hands out whole chains only; Transmit puts whole chains only on
// the ring and refuses one of more than MaxFragments descriptors.
//
// # Steering
//
// The XDP program (built with cilium/ebpf's assembler, no clang) redirects
// IPv4 frames without options or fragmentation whose UDP destination is
// Config.UDPPort into the XSKMAP slot of the frame's RX queue; everything
// else (ARP, ICMP, other UDP, TCP, IPv6, IPv4 options and fragments) goes to
// the kernel, as do NDP frames on a queue without a socket (XDP_PASS as
// bpf_redirect_map's fallback). The program is attached with a bpf_link, so
// it disappears when the process exits or is killed. With Config.SteerAll the
// program redirects every frame instead (a software switch's port,
// internal/softswitch). An interface already
// carrying someone else's XDP program is refused with ErrProgramAttached.
//
// # Concurrency
//
// A Port has one owner goroutine (the engine's core loop): Receive,
// Transmit, Complete, Wait, Alloc and Release are not safe for concurrent
// use. Stats may be read from anywhere. Open must run on a thread inside the
// interface's network namespace.
//
// # Engine usage
//
//	// On a thread inside the interface's netns (testbed.Namespace.Do in tests):
//	p, err := afxdp.Open(afxdp.Config{Interface: "eth0", UDPPort: 6420, Queues: []int{0}})
//	u, q := p.UMEM(), p.Queues()[0]
//	fd, _ := u.DupFD()        // hand to an app process (SCM_RIGHTS); it mmaps u.Size() bytes
//	rx, tx := make([]afxdp.Desc, 64), make([]afxdp.Desc, 64)
//	for {                     // one goroutine owns p
//		n := q.Receive(rx)    // frames now owned by the engine
//		for _, d := range rx[:n] { handle(u.Bytes(d)) }
//		u.Release(rx[:n])     // or Transmit them back out
//		k := u.Alloc(tx)      // frames to build packets in (u.Buffer(tx[i]), set tx[i].Len)
//		m, err := q.Transmit(tx[:k]) // m < k, err == nil: TX ring full, retry tx[m:k] later
//		if idle { p.Wait(timeout) }  // adaptive mode; p.Wake() from another goroutine ends it
//	}
package afxdp

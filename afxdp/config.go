package afxdp

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// BindMode chooses how the AF_XDP sockets bind to their queues.
type BindMode uint8

const (
	// BindAuto tries zero-copy and falls back to copy mode when the driver
	// does not support it (veth: always copy). The zero value.
	BindAuto BindMode = iota
	// BindZeroCopy requires zero-copy; Open fails with ErrZeroCopyUnsupported
	// when the driver lacks it.
	BindZeroCopy
	// BindCopy forces copy mode (the kernel copies frames between the
	// driver's buffers and the UMEM).
	BindCopy
)

func (m BindMode) String() string {
	switch m {
	case BindAuto:
		return "auto"
	case BindZeroCopy:
		return "zero-copy"
	case BindCopy:
		return "copy"
	}
	return fmt.Sprintf("BindMode(%d)", m)
}

// AttachMode chooses where the XDP steering program runs.
type AttachMode uint8

const (
	// AttachAuto tries native (driver) XDP and falls back to generic (skb)
	// XDP; on veth bound to queue 0 only, whose native hook adds a NAPI hop
	// and is slower for AF_XDP, it uses generic (veth's generic path puts
	// every frame on queue 0, so multi-queue veth ports stay native). The
	// zero value.
	AttachAuto AttachMode = iota
	// AttachNative requires the driver's native XDP hook.
	AttachNative
	// AttachGeneric uses the generic (skb) hook, which every driver has.
	AttachGeneric
)

func (m AttachMode) String() string {
	switch m {
	case AttachAuto:
		return "auto"
	case AttachNative:
		return "native"
	case AttachGeneric:
		return "generic"
	}
	return fmt.Sprintf("AttachMode(%d)", m)
}

// Defaults used by Config for zero fields.
const (
	DefaultFrameSize = 2048
	DefaultNumFrames = 8192
	DefaultRingSize  = 2048
	DefaultBindRetry = 500 * time.Millisecond
)

// Config describes one Port: AF_XDP sockets on one or more queues of one
// interface, over one UMEM, with the steering program attached.
// Zero values are documented per field; Open fills them (populate) and
// checks the result (validate).
type Config struct {
	// Interface is the interface name, looked up in the calling thread's
	// network namespace. Required.
	Interface string
	// Queues are the RX/TX queue ids to bind, one socket each. Empty means {0}.
	Queues []int
	// UDPPort is the IPv4 UDP destination port the steering program sends to
	// the sockets; every other frame goes to the kernel. Required (non-zero)
	// unless SteerAll is set.
	UDPPort uint16
	// SteerAll makes the steering program send every frame the interface
	// receives to the sockets (ARP, TCP, anything): the interface is a port of
	// a software switch (internal/softswitch), not a host's. UDPPort is then
	// ignored. The zero value (false) steers only UDPPort.
	SteerAll bool
	// FrameSize is the UMEM chunk size: 2048 or 4096. Zero means 2048.
	FrameSize int
	// NumFrames is the number of frames in the UMEM (shared by all queues).
	// Zero means 8192. Must be at least 2*RingSize*len(Queues) so every fill
	// ring can be kept full and frames remain for transmit.
	NumFrames int
	// Headroom is reserved in front of packet data in every frame, for
	// headers prepended without a copy: the kernel places received data
	// after it (on top of its own XDP_PACKET_HEADROOM) and Alloc returns
	// descriptors that start after it. Zero means none. At most 1024, and
	// FrameSize-Headroom-256 must hold a 1514-byte frame.
	Headroom int
	// RingSize is the number of descriptors of each fill, completion, RX and
	// TX ring: a power of two. Zero means 2048.
	RingSize int
	// Bind chooses zero-copy, copy or auto. Zero means BindAuto.
	Bind BindMode
	// Attach chooses native, generic or auto XDP. Zero means AttachAuto.
	Attach AttachMode
	// DisableNeedWakeup turns off XDP_USE_NEED_WAKEUP, so every Transmit
	// makes a sendto and RX never needs one. The zero value (false) uses
	// need_wakeup when the kernel has it (5.4+).
	DisableNeedWakeup bool
	// TxSkbBudget sets XDP_MAX_TX_SKB_BUDGET: how many frames one sendto
	// pushes in copy mode (kernel default 32). Zero means RingSize; -1 leaves
	// the kernel default. Kernels without the option ignore it (counted in
	// Info.TxSkbBudget == 0).
	TxSkbBudget int
	// MultiBuffer binds the sockets with XDP_USE_SG and loads the steering
	// program with frags support (BPF_F_XDP_HAS_FRAGS, what libbpf's
	// "xdp.frags" section sets), so packets larger than a frame cross as
	// chains of descriptors: every descriptor of a packet but the last has
	// Options&unix.XDP_PKT_CONTD set, on the RX ring and on the TX ring
	// (Linux 6.6+; in copy mode a packet spans at most MaxFragments
	// descriptors). Receive then hands out whole packets only. False: one
	// frame per packet; the kernel drops larger packets.
	MultiBuffer bool
	// BindRetry is how long bind is retried on EBUSY (a socket closed a
	// moment ago on the same queue keeps it for ~50 ms). Zero means 500 ms.
	BindRetry time.Duration
	// Logger receives setup and teardown logs (never per-packet). Nil means none.
	Logger *zap.Logger
}

func (c *Config) populate() {
	if len(c.Queues) == 0 {
		c.Queues = []int{0}
	}
	if c.FrameSize == 0 {
		c.FrameSize = DefaultFrameSize
	}
	if c.RingSize == 0 {
		c.RingSize = DefaultRingSize
	}
	if c.NumFrames == 0 {
		c.NumFrames = DefaultNumFrames
		if min := 2 * c.RingSize * len(c.Queues); c.NumFrames < min {
			c.NumFrames = min
		}
	}
	if c.TxSkbBudget == 0 {
		c.TxSkbBudget = c.RingSize
	}
	if c.BindRetry == 0 {
		c.BindRetry = DefaultBindRetry
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

func (c *Config) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	if c.Interface == "" {
		return bad("Interface is empty")
	}
	if c.UDPPort == 0 && !c.SteerAll {
		return bad("UDPPort is zero")
	}
	if c.FrameSize != 2048 && c.FrameSize != 4096 {
		return bad("FrameSize %d, want 2048 or 4096", c.FrameSize)
	}
	if c.RingSize < 8 || c.RingSize > 1<<16 || c.RingSize&(c.RingSize-1) != 0 {
		return bad("RingSize %d, want a power of two in [8, 65536]", c.RingSize)
	}
	if c.Headroom < 0 || c.Headroom > 1024 || c.FrameSize-c.Headroom-xdpPacketHeadroom < 1514 {
		return bad("Headroom %d leaves no room for a 1514-byte frame in a %d-byte frame", c.Headroom, c.FrameSize)
	}
	if c.NumFrames < 2*c.RingSize*len(c.Queues) {
		return bad("NumFrames %d < 2*RingSize*len(Queues) = %d", c.NumFrames, 2*c.RingSize*len(c.Queues))
	}
	if uint64(c.NumFrames)*uint64(c.FrameSize) > 1<<32 {
		return bad("UMEM of %d x %d bytes exceeds 4 GiB", c.NumFrames, c.FrameSize)
	}
	seen := map[int]bool{}
	for _, q := range c.Queues {
		if q < 0 || q > 1<<16 {
			return bad("queue id %d", q)
		}
		if seen[q] {
			return bad("queue %d listed twice", q)
		}
		seen[q] = true
	}
	if c.Bind > BindCopy {
		return bad("Bind %v", c.Bind)
	}
	if c.Attach > AttachGeneric {
		return bad("Attach %v", c.Attach)
	}
	if c.TxSkbBudget < -1 {
		return bad("TxSkbBudget %d", c.TxSkbBudget)
	}
	return nil
}

// MaxFragments is the most descriptors one multi-buffer packet may span:
// the kernel builds a copy-mode transmit into an skb of at most
// MAX_SKB_FRAGS (17) fragments besides the first buffer, and refuses
// longer chains with EFAULT; receive chains are as long as the packet
// needs. Callers of Receive with MultiBuffer pass at least this many
// descriptors.
const MaxFragments = 18

// xdpPacketHeadroom is the kernel's XDP_PACKET_HEADROOM, which it reserves in
// front of received data in every frame in addition to Config.Headroom.
const xdpPacketHeadroom = 256

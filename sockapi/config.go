package sockapi

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
	"go.uber.org/zap"
)

// PollMode says how goroutines waiting on the stack spend the wait.
type PollMode uint8

const (
	// PollAdaptive spins briefly (Config.Spin), then sleeps until the NIC
	// has frames or a timer is due. The zero value; right when many
	// goroutines share the stack or cores are scarce.
	PollAdaptive PollMode = iota
	// PollBusy spins until the call can complete: lowest latency, one core
	// per waiting goroutine. Use with few goroutines, ideally each locked to
	// its own CPU.
	PollBusy
)

// Policy is the receiver's pull scheduling policy.
type Policy uint8

const (
	// PolicyFair shares the link fairly between senders. The zero value.
	PolicyFair Policy = iota
	// PolicyPriority serves higher WithPriority classes first.
	PolicyPriority
	// PolicyDeadline allocates rates from D3 size and deadline hints and
	// quenches flows that cannot make their deadline.
	PolicyDeadline
)

// CommodityTrim configures commodity packet trimming (ndp.CommodityTrim):
// TrimDSCPs are the DSCP values a trimming switch writes into trimmed frames,
// DataDSCP and ControlDSCP what this stack writes into its DATA and other
// frames.
type CommodityTrim = ndp.CommodityTrim

// Config configures an embedded stack (Open). Zero values select the
// documented defaults.
type Config struct {
	// Interface is the network interface to run on (AF_XDP). Required for
	// Open; ignored by OpenPipe. Open must be called in the interface's
	// network namespace.
	Interface string
	// Queue is the interface queue to bind. Zero is queue 0.
	Queue int
	// Address is the local IPv4 address. Zero means the interface's first
	// IPv4 address (required for OpenPipe).
	Address netip.Addr
	// UDPPort is the NDP service port (UDP) on the wire. Zero means 6420.
	UDPPort uint16
	// LinkRate in bits per second paces PULLs (receiver-driven congestion
	// control). Zero means 10 Gb/s.
	LinkRate int64
	// Gamma in (0, 1] leaves HULL-style headroom: PULLs run at Gamma x
	// LinkRate. Zero means 1.
	Gamma float64
	// Policy is the pull scheduling policy. Zero is PolicyFair.
	Policy Policy
	// PullBatch is how many pull slots one PULL release covers
	// (engine.Config.PullBatch): the PULLs of the next PullBatch-1 slots
	// leave with the one that is due, in one transmit kick. Zero means 8.
	PullBatch int
	// MTU is the IPv4 MTU, at most the interface's. Zero means the
	// interface MTU (1500 for OpenPipe). Above 3826 packets cross AF_XDP
	// as multi-buffer chains, which in copy mode cost every packet about
	// 1 µs more per crossing: on a jumbo interface, a stack whose messages
	// are small gets lower latency at MTU 3826 or less (docs/datapath.md,
	// "Jumbo frames").
	MTU int
	// IW is the first-RTT window in packets. Zero means ndp.DefaultIW(MTU):
	// 93 at MTU 1500, the paper's 30 at MTU 9000.
	IW int
	// CommodityTrim recognises frames trimmed by a switch that knows nothing
	// of NDP (by their DSCP and their being shorter than their lengths say)
	// and marks this stack's frames for such a switch. The zero value is off.
	CommodityTrim CommodityTrim
	// RTO is the retransmission timeout for real loss. Zero means 1ms.
	RTO time.Duration
	// UserTimeout is how long a connection that expects something from its
	// peer (unacknowledged data, a stream it is in the middle of receiving)
	// may hear nothing from it before Read and Write fail with ErrTimeout
	// (ndp.Config.UserTimeout): it rides out link outages shorter than
	// this. Zero means 30s. Range [1ms, 1h].
	UserTimeout time.Duration
	// MaxConns bounds open connections. Zero means 4096.
	MaxConns int
	// RecvBuffer and SendBuffer are per-connection buffer sizes in bytes.
	// Zero means 256 KiB each.
	RecvBuffer, SendBuffer int
	// PollMode: zero is PollAdaptive.
	PollMode PollMode
	// Spin is how long adaptive waiters spin before sleeping. Zero means
	// 50µs. Negative: never spin; waiters sleep at once, parked in the Go
	// runtime's netpoller as on a kernel socket, for processes whose
	// stacks and waiting goroutines outnumber the CPUs (several stacks in
	// one process on a small machine), where spinners take the CPU from
	// the goroutines that have work.
	Spin time.Duration
	// MaxSpin bounds how far the adaptive spin grows while traffic keeps
	// cutting sleeps short (a bulk transfer whose two ends take turns runs
	// about 4x faster over veth when neither side sleeps between turns);
	// it shrinks back to Spin when the stack idles. Zero means 1ms; set it
	// to Spin to never spin longer than Spin.
	MaxSpin time.Duration
	// NoBackgroundPoller disables the stack's background poller goroutine,
	// so only goroutines inside calls on the stack drive it. For PollBusy
	// setups where a goroutine always waits on the stack (a benchmark's
	// pinned client or server thread): it then never competes for a CPU.
	// Timers (retransmissions) run only while some call waits, or in
	// Stack.Poll.
	NoBackgroundPoller bool
	// Logger receives setup and teardown logs. Nil means none.
	Logger *zap.Logger
	// CaptureFile, if set, is a pcapng file Open writes every frame the
	// stack sends and receives to (interface 0 "rx", 1 "tx"), through a
	// bounded buffer a writer goroutine drains: the stack never waits for
	// the disk, and frames that find the buffer full are dropped from the
	// capture (not from the network). contrib/wireshark/ndp.lua decodes
	// the NDP header. Ignored by OpenPipe. Empty means no capture.
	CaptureFile string
	// CaptureMaxBytes bounds the capture file: capture stops when the
	// next frame would take it past this size. Zero means 64 MiB.
	CaptureMaxBytes int64
}

func (c *Config) engineConfig(link engine.Link, res engine.Resolver) (engine.Config, error) {
	if !c.Address.Is4() {
		return engine.Config{}, fmt.Errorf("%w: Address %v is not IPv4", ErrInvalidConfig, c.Address)
	}
	maxConns := c.MaxConns
	if maxConns == 0 {
		maxConns = 4096
	}
	var pol pullpacer.Policy
	switch c.Policy {
	case PolicyFair:
		pol = pullpacer.PolicyFair
	case PolicyPriority:
		pol = pullpacer.PolicyPriority
	case PolicyDeadline:
		pol = pullpacer.PolicyDeadline
	default:
		return engine.Config{}, fmt.Errorf("%w: Policy %d", ErrInvalidConfig, c.Policy)
	}
	var mode engine.PollMode
	switch c.PollMode {
	case PollAdaptive:
		mode = engine.PollAdaptive
	case PollBusy:
		mode = engine.PollBusy
	default:
		return engine.Config{}, fmt.Errorf("%w: PollMode %d", ErrInvalidConfig, c.PollMode)
	}
	return engine.Config{
		Link: link,
		Endpoint: ndp.Config{
			LocalIP: c.Address.As4(), UDPPort: c.UDPPort, MTU: c.MTU, IW: c.IW, RTO: c.RTO, Commodity: c.CommodityTrim,
			UserTimeout: c.UserTimeout,
			MaxConns:    maxConns, RecvBuffer: c.RecvBuffer, SendBuffer: c.SendBuffer,
			Seed: uint64(time.Now().UnixNano()),
		},
		Resolver:     res,
		LinkRate:     c.LinkRate,
		Gamma:        c.Gamma,
		Policy:       pol,
		PullBatch:    c.PullBatch,
		Mode:         mode,
		Spin:         c.Spin,
		MaxSpin:      c.MaxSpin,
		NoBackground: c.NoBackgroundPoller,
		Logger:       c.Logger,
	}, nil
}

// OpenPipe returns two embedded stacks joined by an in-memory cable, with
// addresses a and b (IPv4). It needs no privileges or interfaces: for tests
// and examples of code written against this package. cfg's other fields
// apply to both (Interface is ignored).
func OpenPipe(cfg Config, a, b netip.Addr) (*Stack, *Stack, error) {
	macA, macB := [6]byte{0x02, 0x6e, 0x64, 0x70, 0, 1}, [6]byte{0x02, 0x6e, 0x64, 0x70, 0, 2}
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = 1500
	}
	la, lb := engine.NewMemPipe(engine.MemConfig{FrameCap: mtu + 14}, macA, macB)
	res := engine.StaticResolver{a.As4(): macA, b.As4(): macB}
	sa, err := openMem(cfg, la, a, res)
	if err != nil {
		return nil, nil, err
	}
	sb, err := openMem(cfg, lb, b, res)
	if err != nil {
		sa.Close()
		return nil, nil, err
	}
	return sa, sb, nil
}

// openMem opens an embedded stack with address ip on an in-memory link.
func openMem(cfg Config, l engine.Link, ip netip.Addr, res engine.Resolver) (*Stack, error) {
	cfg.Address = ip
	ec, err := cfg.engineConfig(l, res)
	if err != nil {
		return nil, err
	}
	s, err := engine.New(ec)
	if err != nil {
		return nil, err
	}
	return newStack(&embedded{s: s}), nil
}

package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/ndpstack/ndpstack/internal/capture"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
	"go.uber.org/zap"
)

// PollMode says how goroutines that wait on a Stack spend the wait.
type PollMode uint8

const (
	// PollAdaptive: a waiter spins calling Poll for Config.Spin, then sleeps;
	// the background poller spins the same way and then sleeps on the link
	// (XSK fd / channel) until frames arrive, a timer is due or an API call
	// wakes it. The zero value.
	PollAdaptive PollMode = iota
	// PollBusy: a waiting application goroutine spins calling Poll until
	// its condition holds (lowest latency; one core per waiter). The
	// background poller still sleeps while an application goroutine polls.
	PollBusy
)

func (m PollMode) String() string {
	switch m {
	case PollAdaptive:
		return "adaptive"
	case PollBusy:
		return "busy"
	}
	return fmt.Sprintf("PollMode(%d)", m)
}

// Config configures a Stack. Zero values select the documented defaults;
// New fills them and validates.
type Config struct {
	// Link is the NIC side. Required. The Stack owns it and closes it.
	Link Link
	// Capture, if not nil, receives a copy of every frame the stack
	// receives and transmits (internal/capture; nil: no capture, at the
	// cost of one nil check per batch). The caller closes it after
	// closing the Stack.
	Capture *capture.Writer
	// Endpoint configures the NDP endpoint. LocalIP is required; LocalMAC
	// is taken from the Link; MTU defaults to FrameCap-14 of the Link.
	Endpoint ndp.Config
	// Resolver maps peer IPv4 addresses to MACs on Dial. Required for Dial
	// (nil: Dial fails with ErrNoNeighbor); accepting needs none.
	Resolver Resolver
	// NeighborTTL is how long a resolved MAC is cached. Zero means 30s.
	NeighborTTL time.Duration
	// LinkRate is the link rate in bits per second: the pull pacer spaces
	// PULLs so elicited data arrives at Gamma x LinkRate. Zero means 10 Gb/s.
	LinkRate int64
	// Gamma is the HULL headroom factor in (0, 1]. Zero means 1.
	Gamma float64
	// Policy is the pull queue's scheduling policy. Zero is fair queuing.
	Policy pullpacer.Policy
	// EdgeRate is the edge pacer (token bucket) rate for pushed packets of
	// connections that ask for pacing, bits/s. Zero means LinkRate.
	EdgeRate int64
	// PullBurst is the most PULLs the pull queue releases back to back
	// when it is polled late (pullpacer.QueueConfig.MaxBurst). Zero means
	// 16. The pacer spaces PULLs a data packet's wire time apart (1.2 µs
	// at 10 Gb/s and MTU 1500), but a software poll comes back only every
	// few µs, more while it handles a receive batch: slots missed beyond
	// PullBurst are lost. With 2 (the pull queue's own default) the pull
	// rate fell to about one slot in five; with 8 a receiver that is the
	// bottleneck (its CPU) was held to 8 packets per poll cycle, each cycle
	// paying a poll, a PULL kick and a Read of its own. 16 covers a poll
	// ~20 µs late at 10 Gb/s. The burst is spread round robin over the
	// senders being pulled, so only a stall's catch-up with four or more
	// of them can exceed an 8-packet switch queue (the excess is trimmed,
	// NACKed and pulled again); on-time releases are PullBatch.
	PullBurst int
	// PullBatch is how many pull slots one release covers: a poll that
	// finds a PULL due releases it with those of the next PullBatch-1
	// slots (at most PullBatch PULLs, one transmit kick; Stack.pullHorizon).
	// Zero means 8 (at most PullBurst): within the paper's 8-packet
	// switch queue. 1 releases each PULL at its own slot; at most
	// PullBurst.
	PullBatch int
	// Batch is the most frames received or transmitted per Poll. Zero
	// means 64.
	Batch int
	// Mode is the poll mode. Zero is PollAdaptive.
	Mode PollMode
	// Spin is how long an adaptive waiter or the idle background poller
	// spins before sleeping. Zero means 50µs. Negative: never spin; a
	// waiter sleeps at once (on the link or its channel) and the
	// background poller as soon as it finds nothing to do, as goroutines
	// waiting on kernel sockets do. Right where stacks and waiting
	// goroutines outnumber the CPUs (several stacks in one process on a
	// small machine): spinners there take the CPU from the goroutines
	// that have work. Pair it with XDPConfig.RuntimeWait.
	Spin time.Duration
	// MaxSpin bounds the adaptive spin window: it grows from Spin while
	// sleeps keep being cut short by traffic (a transfer whose ends take
	// turns) and shrinks back when the stack goes idle. Zero means 1ms;
	// it is at least Spin.
	MaxSpin time.Duration
	// NoBackground disables the background poller goroutine: only
	// application goroutines inside Stack calls make progress (the owner of
	// the Stack then drives it with Poll, e.g. ndpd's core loop).
	NoBackground bool
	// SeparateControl sends one frame per ACK and per PULL, as the NDP
	// paper does. By default the stack sets Endpoint.CoalesceControl: a
	// connection's ACKs and PULLs queued for the same transmit batch share
	// frames, which on AF_XDP in copy mode (a copy and a share of a sendto
	// per frame) removes most control frames of a transfer; and, unless
	// Endpoint.AckHold is set (negative: none), Endpoint.AckHold is
	// min(200 µs, RTO/4): a pulled connection's ACKs wait for its next PULL
	// frame instead of taking frames of their own.
	SeparateControl bool
	// Endpoint.InitialRTO, when zero, is set to min(4*RTO, MaxRTO)
	// (defaultInitialRTOMul; negative: RTO, the paper's): the RTO of a
	// connection with no RTT estimate, a fresh stack's first window to an
	// address. Its ACKs come back when the peer's stack notices the
	// window and its application accepts, and on a busy host that took
	// 0.4-1.5 ms: at the 1 ms floor the whole first window (93 packets at
	// MTU 1500) was resent for nothing in most bulk runs.
	// OnEvent, when set, is called for every connection event after the
	// Stack processed it, with the Stack's lock held: it must not call back
	// into the Stack. For embedders (ndpd) that translate events into their
	// own notifications.
	OnEvent func(c *Conn, kind ndp.EventKind)
	// Clock returns the monotonic time. Nil means pullpacer.MonotonicNow.
	Clock func() ndp.Time
	// Logger receives setup/teardown logs only. Nil means none.
	Logger *zap.Logger
}

// defaultInitialRTOMul is Endpoint.InitialRTO's default as a multiple of
// the RTO (docs/decisions.md: "The initial RTO").
const defaultInitialRTOMul = 4

// defaultAckHold is Endpoint.AckHold's default with coalesced control frames
// (SeparateControl off), at most a quarter of the RTO.
const defaultAckHold = 200 * time.Microsecond

// ErrInvalidConfig wraps every Config validation failure.
var ErrInvalidConfig = errors.New("engine: invalid config")

func (c *Config) populate() {
	if c.Link != nil {
		c.Endpoint.LocalMAC = c.Link.MAC()
		if c.Endpoint.MTU == 0 {
			c.Endpoint.MTU = c.Link.FrameCap() - 14
		}
	}
	if !c.SeparateControl {
		c.Endpoint.CoalesceControl = true
		switch rto := c.Endpoint.RTO; {
		case c.Endpoint.AckHold < 0:
			c.Endpoint.AckHold = 0
		case c.Endpoint.AckHold == 0 && rto == 0:
			c.Endpoint.AckHold = defaultAckHold
		case c.Endpoint.AckHold == 0:
			c.Endpoint.AckHold = min(defaultAckHold, rto/4)
		}
	}
	switch rto := c.Endpoint.RTO; {
	case c.Endpoint.InitialRTO < 0:
		c.Endpoint.InitialRTO = 0 // the endpoint's default: RTO
	case c.Endpoint.InitialRTO == 0:
		if rto == 0 {
			rto = ndp.DefaultRTO
		}
		m := c.Endpoint.MaxRTO
		if m == 0 {
			m = ndp.DefaultMaxRTO(rto)
		}
		c.Endpoint.InitialRTO = min(defaultInitialRTOMul*rto, max(m, rto))
	}
	if c.NeighborTTL == 0 {
		c.NeighborTTL = 30 * time.Second
	}
	if c.LinkRate == 0 {
		c.LinkRate = 10e9
	}
	if c.Gamma == 0 {
		c.Gamma = 1
	}
	if c.EdgeRate == 0 {
		c.EdgeRate = c.LinkRate
	}
	if c.Batch == 0 {
		c.Batch = 64
	}
	if c.PullBurst == 0 {
		c.PullBurst = 16
	}
	if c.PullBatch == 0 {
		c.PullBatch = min(8, c.PullBurst)
	}
	if c.Spin == 0 {
		c.Spin = 50 * time.Microsecond
	}
	if c.MaxSpin == 0 {
		c.MaxSpin = time.Millisecond
	}
	c.MaxSpin = max(c.MaxSpin, c.Spin, 0)
	if c.Clock == nil {
		c.Clock = pullpacer.MonotonicNow
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
}

func (c *Config) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	switch {
	case c.Link == nil:
		return bad("Link is required")
	case c.Endpoint.MTU+14 > c.Link.FrameCap():
		return bad("MTU %d does not fit the link's %d-byte frames", c.Endpoint.MTU, c.Link.FrameCap())
	case c.Batch < 1 || c.Batch > 1024:
		return bad("Batch %d outside [1, 1024]", c.Batch)
	case c.PullBurst < 1 || c.PullBurst > 1024:
		return bad("PullBurst %d outside [1, 1024]", c.PullBurst)
	case c.PullBatch < 1 || c.PullBatch > c.PullBurst:
		return bad("PullBatch %d outside [1, PullBurst %d]", c.PullBatch, c.PullBurst)
	case c.Gamma <= 0 || c.Gamma > 1:
		return bad("Gamma %v outside (0, 1]", c.Gamma)
	case c.LinkRate < 0 || c.EdgeRate < 0:
		return bad("negative rate")
	case c.Mode > PollBusy:
		return bad("Mode %v", c.Mode)
	case c.NeighborTTL < 0:
		return bad("negative duration")
	}
	return nil
}

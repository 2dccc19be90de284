package ndp

import (
	"fmt"
	"time"
)

// Time is a point on the caller's monotonic clock, in nanoseconds. The
// package never reads a clock: every entry point that needs time takes now.
type Time int64

// Addr is an NDP endpoint address: Ethernet and IPv4 address of the host
// interface and the NDP-level port (not the UDP port).
type Addr struct {
	MAC  [6]byte
	IP   [4]byte
	Port uint16
}

// Config configures an Endpoint. The zero value of every field selects the
// documented default; NewEndpoint fills defaults and validates.
type Config struct {
	LocalMAC [6]byte // required (zero MAC allowed for tests)
	LocalIP  [4]byte // required (non-zero)

	// UDPPort is the NDP service port (UDP destination port of every NDP
	// frame, on both ends). Default DefaultPort.
	UDPPort uint16
	// MTU is the IPv4 MTU. Default 1500; 9000 for jumbo frames. Range
	// [HeaderOverhead-14+64, 9216].
	MTU int
	// IW is the initial window: packets pushed without being pulled when a
	// connection starts or after its sender marked LAST. One pull answers
	// each arrival, so IW is also the packets a connection keeps in flight:
	// it has to cover the pull rate times the round trip, host processing
	// included (paper section 6.1, Fig. 11). Default: 30 packets (the
	// paper's, at MTU 9000), and at smaller MTUs as many as carry
	// DefaultIWBytes (93 at MTU 1500). Range [1, 1024].
	IW int
	// RTO is the initial and the minimum retransmission timeout for real
	// loss. Default 1ms (the paper's value for a 400us worst-case RTT). Each
	// connection adapts its RTO to the RTT it measures (RFC 6298: SRTT +
	// max(10us, 4*RTTVAR), Karn's rule), never below RTO nor above MaxRTO,
	// starting from the endpoint's estimate for the remote address (InitialRTO
	// if there is none), and doubles it per timeout round without a valid RTT
	// sample (backoff, up to MaxRTO). See rtt.go and docs/decisions.md.
	RTO time.Duration
	// MaxRTO bounds the adaptive RTO, its backoff and the stall interval.
	// Default 32*RTO (32ms). Range [RTO, 1 minute]. Unused with FixedRTO.
	MaxRTO time.Duration
	// InitialRTO is the RTO of a connection that has no RTT estimate: no
	// sample of its own and none for its address or the endpoint to seed
	// it from, which is a fresh endpoint's first window. Default RTO (the
	// paper's: the first window times out like any other). Range [RTO,
	// MaxRTO]. Unused with FixedRTO. Real stacks (internal/engine) set it
	// higher: a first window's ACKs wait for the peer's host to notice it,
	// and one that fired at the floor resent the whole window (93 packets
	// at MTU 1500) for nothing (docs/decisions.md: "The initial RTO").
	InitialRTO time.Duration
	// FixedRTO keeps every connection's RTO at exactly RTO, with no backoff
	// and a constant StallTimeout: the paper's behaviour, for reproducing
	// it. RTT samples are still taken (Stats, Endpoint.RTT) but not used.
	FixedRTO bool
	// StallTimeout: when a sender has work queued but has received no
	// PULL/ACK/NACK for this long, it probes: a header-only copy of its
	// first queued retransmission (the peer re-pulls or re-ACKs it), or one
	// unsolicited new packet. Covers lost PULLs and lost final ACKs, and is
	// the zero-window probe under flow control. Default 2*RTO. Adaptive
	// (not FixedRTO): StallTimeout + 2*(connection's base RTO - RTO), backed
	// off like the RTO, at most max(MaxRTO, StallTimeout).
	StallTimeout time.Duration
	// UserTimeout is how long a connection that expects something from
	// its peer (unacknowledged or queued data, a stream it is in the middle
	// of receiving) may go without hearing anything from it before it fails
	// with ErrTimeout, in the spirit of TCP_USER_TIMEOUT (RFC 5482). A
	// connection silent for a while probes its peer with keepalives (see
	// MaxProbeInterval and silence.go) and resumes when the peer answers, so
	// it rides out link outages shorter than this; a peer that gave up or
	// lost the connection answers a keepalive with a RESET. Idle
	// connections (nothing outstanding either way) never time out. Default
	// 30s: link flaps, switch reboots and bond failovers last one to a few
	// seconds and must not cost connections, while a dead peer's resources
	// are freed within half a minute; RPCs stay bounded by their own
	// deadlines. Range [1ms, 1 hour].
	UserTimeout time.Duration
	// MaxProbeInterval bounds the interval between keepalives of a silent
	// connection: they start after about four of its longest RTOs (at least
	// 1s, at most UserTimeout/2) of silence and back off by doubling up
	// to this, so an outage costs a few headers per second per connection,
	// and a connection notices the link is back within this interval.
	// Default 250ms (kernel TCP resumes at its next RTO backoff point,
	// typically 0.2-1.6s after a link returns). Range [1ms, UserTimeout].
	MaxProbeInterval time.Duration
	// Paths is the number of UDP source ports used as path entropy per
	// connection. Default 8. Range [1, 256].
	Paths int
	// RecvBuffer is the per-connection receive buffer in bytes (flow
	// control). Default 256 KiB. Minimum 2*MaxPayload(MTU).
	RecvBuffer int
	// SendBuffer is the per-connection send buffer in bytes. Default 256 KiB.
	// Minimum MaxPayload(MTU).
	SendBuffer int
	// TimeWait is how long a finished connection's identity is remembered
	// to reject replays and duplicates (paper: MSL < 1ms) and to re-ACK a
	// peer still retransmitting its last packets. Default: about a dozen of
	// a peer's longest retransmission rounds with the same configuration,
	// plus 2*StallTimeout, at least 10ms: 12*max(MaxRTO, StallTimeout) +
	// 2*StallTimeout = 388ms with the other defaults; with FixedRTO
	// 12*max(RTO, StallTimeout) + 2*StallTimeout = 28ms. A peer that comes
	// back after a longer outage to a connection this end finished gets a
	// RESET (as TCP's does after TIME_WAIT). Each frame that reaches an entry
	// keeps it for TimeWait from then: a peer that keeps retransmitting or
	// probing (at least every MaxProbeInterval, below the default
	// TimeWait) keeps its key however long its ACKs take. The table
	// holds MaxTimeWait entries: beyond MaxTimeWait/TimeWait connections per
	// second entries are evicted early (Stats.TimeWaitEvicted).
	TimeWait time.Duration
	// MaxTimeWait bounds the time-wait table. When full, the oldest entry is
	// evicted early (counted in Stats.TimeWaitEvicted); a host that calls
	// Endpoint.HandleIdle keeps it at most 15/16 full that way, ahead of
	// the next close. Default MaxConns.
	MaxTimeWait int
	// MaxConns bounds the connection table. Default 1024. Range [1, 1<<20].
	MaxConns int
	// ListenReserve is the number of connection objects (with buffers)
	// preallocated by Listen so that first-RTT packets open connections
	// without allocating. Default min(8, MaxConns); the pool grows on
	// demand beyond that and keeps what it grew.
	ListenReserve int
	// ControlQueue bounds queued control frames (ACK/NACK/PULL/RESET)
	// awaiting PollFrame. Overflow drops the frame (counted). Default 2048.
	ControlQueue int
	// CoalesceControl merges a connection's ACKs and PULLs that are queued
	// at once (one receive batch) into fewer frames: an ACK frame also
	// acknowledges up to 64 following packets (FlagAckMore, a bitmap in the
	// Offset field) and carries the connection's latest pull counter
	// (FlagPull), so a batch of arrivals from one sender costs one control
	// frame instead of an ACK and a PULL per packet; a plain ACK whose
	// connection can send DATA right then rides in that DATA (FlagAck).
	// Nothing is delayed: only frames already waiting for the same
	// PollFrame calls merge, and never past a NACK of the connection. Off
	// (the default) sends one frame per ACK and per PULL, as the NDP paper
	// does; the simulator keeps that. The AF_XDP engine turns it on, where
	// every frame costs a system call's share and a copy. Receivers of
	// either setting understand both.
	CoalesceControl bool
	// AckHold, with CoalesceControl, lets a receiver hold a connection's
	// ACKs for up to AckHold and send them in the connection's next PULL
	// frame (ackhold.go): an incast's receiver otherwise sends an ACK frame
	// and, a pull slot later, a PULL frame for most packets. A held ACK
	// leaves at once when no PULL is coming (the sender's LAST) or another
	// frame of the connection is queued. Zero (the default) holds nothing;
	// below RTO.
	AckHold time.Duration
	// Commodity recognises frames trimmed by switches that know nothing of
	// NDP and marks frames for them (CommodityTrim). The zero value is off.
	Commodity CommodityTrim
	// ZeroPayload is for simulators: the endpoint carries stream lengths,
	// not bytes, and every payload byte is taken to be zero. Write reads
	// only len(p); a DATA frame's payload region is left as the caller's
	// buffer held it and its UDP checksum is the one a zero payload has;
	// received frames' checksums are verified the same way without reading
	// their payload; Read reports its count without writing p. Frames have
	// the lengths they have with bytes, so every decision (windows, pulls,
	// trimming, timers) is the same as with bytes: a simulated run makes
	// the same events. No send or receive buffer is allocated. Never set it
	// on a stack whose frames reach a real network (their payload is
	// whatever the buffer held, and fails other receivers' checksums).
	// Off by default.
	ZeroPayload bool
	// Seed seeds the deterministic PRNG (path permutations, connection ids,
	// initial sequence numbers). Zero is a valid seed.
	Seed uint64
}

const (
	defaultMTU         = 1500
	defaultIW          = 30
	defaultPaths       = 8
	defaultBuffer      = 256 << 10
	defaultTimeWait    = 10 * time.Millisecond
	defaultMaxConns    = 1024
	defaultCtlQueue    = 2048
	defaultUserTimeout = 30 * time.Second
	defaultMaxProbe    = 250 * time.Millisecond
	minProbeAfter      = Time(time.Second)
	maxUserTimeout     = time.Hour
	timeWaitRounds     = 12
	defaultMaxRTOMul   = 32          // MaxRTO = 32*RTO
	maxRTOLimit        = time.Minute // RTO, MaxRTO, StallTimeout
	maxMTU             = 9216
	minMTU             = ipOverhead + 64
	maxWindowPkts      = 1024 // per-direction sequence window (packets in flight)
)

// DefaultRTO is Config.RTO's default: the paper's 1ms for a 400us
// worst-case RTT.
const DefaultRTO = time.Millisecond

// DefaultMaxRTO is Config.MaxRTO's default for an RTO: 32*RTO, at most a
// minute.
func DefaultMaxRTO(rto time.Duration) time.Duration {
	return min(defaultMaxRTOMul*rto, maxRTOLimit)
}

// DefaultIWBytes is the payload the default initial window carries at
// least: a 10 Gb/s pull rate's worth of about 100us, the round trip of two
// stacks on a shared host whose threads are not always running (copy-mode
// AF_XDP, a kick and a poll each way). At MTU 9000 the paper's 30 packets
// already carry twice that.
const DefaultIWBytes = 128 << 10

// DefaultIW is Config.IW's default at an MTU: the paper's 30 packets, or
// as many as carry DefaultIWBytes of payload if that is more.
func DefaultIW(mtu int) int {
	if mtu < minMTU || mtu > maxMTU {
		return defaultIW
	}
	p := MaxPayload(mtu)
	return min(max(defaultIW, (DefaultIWBytes+p-1)/p), maxWindowPkts)
}

func (c *Config) populate() {
	if c.UDPPort == 0 {
		c.UDPPort = DefaultPort
	}
	if c.MTU == 0 {
		c.MTU = defaultMTU
	}
	if c.IW == 0 {
		c.IW = DefaultIW(c.MTU)
	}
	if c.RTO == 0 {
		c.RTO = DefaultRTO
	}
	if c.MaxRTO == 0 && c.RTO <= maxRTOLimit {
		c.MaxRTO = DefaultMaxRTO(c.RTO)
	}
	if c.InitialRTO == 0 {
		c.InitialRTO = c.RTO
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = 2 * c.RTO
	}
	if c.UserTimeout == 0 {
		c.UserTimeout = defaultUserTimeout
	}
	if c.MaxProbeInterval == 0 {
		c.MaxProbeInterval = min(defaultMaxProbe, c.UserTimeout)
	}
	if c.Paths == 0 {
		c.Paths = defaultPaths
	}
	if c.RecvBuffer == 0 {
		c.RecvBuffer = defaultBuffer
	}
	if c.SendBuffer == 0 {
		c.SendBuffer = defaultBuffer
	}
	if c.TimeWait == 0 && c.RTO <= maxRTOLimit && c.MaxRTO <= maxRTOLimit && c.StallTimeout <= maxRTOLimit {
		c.TimeWait = max(defaultTimeWait, c.retrySpan()+2*c.StallTimeout)
	}
	if c.MaxConns == 0 {
		c.MaxConns = defaultMaxConns
	}
	if c.MaxTimeWait == 0 {
		c.MaxTimeWait = c.MaxConns
	}
	if c.ListenReserve == 0 {
		c.ListenReserve = min(8, c.MaxConns)
	}
	if c.ControlQueue == 0 {
		c.ControlQueue = defaultCtlQueue
	}
}

func (c *Config) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	switch {
	case c.LocalIP == [4]byte{}:
		return bad("LocalIP is required")
	case c.MTU < minMTU || c.MTU > maxMTU:
		return bad("MTU %d outside [%d, %d]", c.MTU, minMTU, maxMTU)
	case c.IW < 1 || c.IW > maxWindowPkts:
		return bad("IW %d outside [1, %d]", c.IW, maxWindowPkts)
	case c.RTO < 0 || c.MaxRTO < 0 || c.StallTimeout < 0 || c.TimeWait < 0:
		return bad("negative duration")
	case c.MaxRTO < c.RTO:
		return bad("MaxRTO %v < RTO %v", c.MaxRTO, c.RTO)
	case c.InitialRTO < c.RTO || c.InitialRTO > c.MaxRTO:
		return bad("InitialRTO %v outside [RTO %v, MaxRTO %v]", c.InitialRTO, c.RTO, c.MaxRTO)
	case !c.Commodity.valid():
		return bad("Commodity: DSCP above 63 or more than 4 TrimDSCPs")
	case c.RTO > maxRTOLimit || c.MaxRTO > maxRTOLimit || c.StallTimeout > maxRTOLimit:
		return bad("RTO %v, MaxRTO %v or StallTimeout %v above %v", c.RTO, c.MaxRTO, c.StallTimeout, maxRTOLimit)
	case c.UserTimeout < time.Millisecond || c.UserTimeout > maxUserTimeout:
		return bad("UserTimeout %v outside [1ms, %v]", c.UserTimeout, maxUserTimeout)
	case c.MaxProbeInterval < time.Millisecond || c.MaxProbeInterval > c.UserTimeout:
		return bad("MaxProbeInterval %v outside [1ms, UserTimeout %v]", c.MaxProbeInterval, c.UserTimeout)
	case c.Paths < 1 || c.Paths > 256:
		return bad("Paths %d outside [1, 256]", c.Paths)
	case c.RecvBuffer < 2*MaxPayload(c.MTU):
		return bad("RecvBuffer %d < 2*MaxPayload(MTU)=%d", c.RecvBuffer, 2*MaxPayload(c.MTU))
	case c.SendBuffer < MaxPayload(c.MTU):
		return bad("SendBuffer %d < MaxPayload(MTU)=%d", c.SendBuffer, MaxPayload(c.MTU))
	case c.MaxConns < 1 || c.MaxConns > 1<<20:
		return bad("MaxConns %d outside [1, 1<<20]", c.MaxConns)
	case c.MaxTimeWait < 1:
		return bad("MaxTimeWait %d < 1", c.MaxTimeWait)
	case c.ListenReserve < 0 || c.ListenReserve > c.MaxConns:
		return bad("ListenReserve %d outside [0, MaxConns]", c.ListenReserve)
	case c.AckHold < 0 || c.AckHold >= c.RTO:
		return bad("AckHold %v outside [0, RTO %v)", c.AckHold, c.RTO)
	case c.ControlQueue < 16:
		return bad("ControlQueue %d < 16", c.ControlQueue)
	}
	return nil
}

// retrySpan is about a dozen of a peer's longest retransmission rounds (RTO
// or stall interval after backoff): how long time-wait waits for a peer's
// retransmissions through ordinary loss.
func (c *Config) retrySpan() time.Duration {
	rto := c.MaxRTO
	if c.FixedRTO {
		rto = c.RTO
	}
	return timeWaitRounds * max(rto, c.StallTimeout)
}

// DialOptions are per-connection options given to Dial.
type DialOptions struct {
	LocalPort uint16 // 0 = ephemeral
	Size      int64  // D3 size hint in bytes (0 = none)
	Deadline  Time   // D3 deadline, absolute on the dialer's clock (0 = none); relative on the wire
	Priority  uint8  // 0 = normal; >0 = strict priority class
	Paced     bool   // ask the host's edge pacer to pace pushed packets
}

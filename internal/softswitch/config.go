package softswitch

import (
	"errors"
	"fmt"
	"time"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"go.uber.org/zap"
)

// Personality says how the switch trims.
type Personality uint8

const (
	// TrimNDP is the NDP-aware switch of the paper (NetFPGA, P4): internal/fabric's
	// port, which parses NDP headers, sets NDP's trimmed flag and returns headers to
	// their sender when the header queue overflows. The zero value.
	TrimNDP Personality = iota
	// TrimCommodity is packet trimming as shipping switches do it (SAI packet
	// trimming, Spectrum): the switch knows nothing of NDP. A frame whose DSCP is
	// DataDSCP and that finds the data queue full is cut to TrimSize bytes, its
	// DSCP is rewritten to TrimDSCP and it leaves on the high-priority queue;
	// frames whose DSCP is ControlDSCP or TrimDSCP use the high-priority queue.
	TrimCommodity
)

func (p Personality) String() string {
	switch p {
	case TrimNDP:
		return "ndp"
	case TrimCommodity:
		return "commodity"
	}
	return fmt.Sprintf("Personality(%d)", uint8(p))
}

// Config configures a Switch. Zero values select the documented defaults.
type Config struct {
	// Ports are the interfaces to join, looked up in the calling thread's network
	// namespace. At least two.
	Ports []string
	// Spines, when positive, makes the switch a two-tier leaf-spine fabric
	// emulated in this one process instead of one switch: Leaf says which leaf
	// each port belongs to, and every leaf has one internal link to each of the
	// Spines spines (at SpineRate). A leaf sends a frame for a host on another
	// leaf up the spine its ECMP hash of the 5-tuple picks. Zero means one
	// switch.
	Spines int
	// Leaf[i] is the leaf (0, 1, ...) of Ports[i] when Spines > 0; every leaf
	// from 0 to the largest has at least one port.
	Leaf []int
	// SpineRate is the emulated rate of every leaf-spine link, both directions.
	// Zero means Rate.
	SpineRate int64
	// LinkRates overrides the rate of single leaf-spine links (a degraded link).
	LinkRates []LinkRate
	// Rate is every port's emulated line rate in bits per second: a frame of n bytes
	// occupies its output link for (n+FrameOverhead)*8/Rate. Zero means 10 Gb/s.
	Rate int64
	// FrameOverhead is the bytes every frame occupies on an emulated link beyond
	// its own length. ndp.WireOverhead (24: preamble, start delimiter, FCS and
	// inter-frame gap) makes the links real Ethernet, as the receivers' pull
	// pacers and the simulator count them, so pulls at gamma 1 fill a link
	// exactly. Zero means none: the links carry frames back to back, 1.6% more
	// than Ethernet at MTU 1500, headroom that pulls at gamma 1 leave unused.
	FrameOverhead int
	// Fabric configures the NDP queues of every port (TrimNDP): the paper's 8-packet
	// data queue, header queue and WRR 10:1 by default. Its Seed is offset by the port
	// number.
	Fabric fabric.Config
	// HostQueue, when positive, puts an emulated link at Rate between each
	// port's host and the switch, with a drop-tail queue of HostQueue frames
	// (the host NIC's) and a second one as deep for NDP control frames, which
	// the link sends first: a host's bursts reach the switch's queues at the
	// link rate, as from a real NIC, instead of as fast as the veth delivers
	// them, and its PULLs do not wait behind its own data. Zero means frames
	// enter the switch as they arrive.
	HostQueue int
	// OtherQueue is the depth in frames of the drop-tail queue that holds every frame
	// that is not NDP (kernel TCP, ARP, ICMP). Zero means 100.
	OtherQueue int
	// OtherECN marks ECN CE on ECN-capable frames that arrive to a drop-tail queue
	// holding at least OtherECN frames (DCTCP's K). Zero means no marking.
	OtherECN int
	// NDPPort is the UDP destination port of NDP frames. Zero means 6420.
	NDPPort uint16
	// Personality chooses NDP-aware or commodity trimming. Zero is TrimNDP.
	Personality Personality
	// Commodity configures TrimCommodity.
	Commodity CommodityConfig
	// Horizon is how far ahead of a frame's emulated departure time the switch may
	// hand it to its output veth, so that one wakeup sends a batch. Zero means
	// 20 µs, or Tick + 20 µs when Tick is set (a pass then sends what departs
	// before the next one).
	Horizon time.Duration
	// CatchUp is how much emulated link time a pass that runs late (the switch
	// thread was not scheduled) may make up by sending a burst: a port whose link
	// would have been busy all along loses no capacity to a stall shorter than
	// CatchUp, and a frame queued at a link crosses it at its emulated time.
	// Beyond CatchUp the link's clock jumps to the pass's time less CatchUp
	// (PortStats.LostNs counts what it skipped). Zero means 20 ms: on a loaded
	// 2-CPU machine the thread's wakeups run late by milliseconds, and with
	// the former 500 µs (less than one 3,500-byte frame at 50 Mb/s) every hop
	// of a leaf-spine fabric added its pass's lateness to each frame's
	// crossing (docs/datapath.md, "The leaf-spine permutation").
	CatchUp time.Duration
	// Spin is how long the loop keeps polling after its last frame before it sleeps
	// in ppoll(2). Zero means 20 µs; negative means never spin.
	Spin time.Duration
	// Tick, when positive, makes the loop sleep Tick after every pass that
	// moved frames, as a NIC's interrupt moderation (rx-usecs) does: the first
	// frame after a quiet spell is switched at once (Spin, ppoll(2)), and
	// while frames keep flowing the loop wakes once per Tick, queues what
	// arrived meanwhile at that pass's time and sends the next Tick's
	// departures (Horizon defaults to Tick + 20 µs) in one transmit call per
	// port. Under a sustained load (an incast at 1 Gb/s: a frame in or out
	// every few microseconds) this trades up to Tick of forwarding delay for a
	// sleep per Tick instead of a spinning thread and a transmit call per
	// frame or two. Zero means no tick; at most 1 ms.
	Tick time.Duration
	// Priority is the SCHED_FIFO priority (1-99) of Run's thread, so that a
	// frame's arrival or departure time wakes the switch at once even when
	// every CPU runs a busy-polling stack, as a hardware switch runs beside its
	// hosts. Under the normal policy a thread woken from ppoll(2) waits for the
	// running task's EEVDF slice (milliseconds): with the NDP client and
	// server spinning on the two CPUs, 1 KiB RPCs through the switch had a p99
	// of 2-3 ms (docs/datapath.md, "RPCs through ndpswitch"). The kernel's RT
	// throttling (sched_rt_runtime_us) still leaves the other tasks 5% of a CPU
	// should the loop spin without end. Zero means 1; negative keeps the
	// normal policy. Where the policy cannot be set (no CAP_SYS_NICE) Run
	// logs it and runs under the normal policy.
	Priority int
	// jumbo is set by Open when a port's MTU needs 4096-byte AF_XDP frames.
	jumbo bool
	// Logger receives setup and teardown logs (never per-packet). Nil means none.
	Logger *zap.Logger
}

// LinkRate is the emulated rate of the link between leaf Leaf and spine
// Spine: Up toward the spine, Down toward the leaf; zero keeps SpineRate.
type LinkRate struct {
	Leaf, Spine int
	Up, Down    int64
}

// leaves is the number of leaves (zero for one switch).
func (c *Config) leaves() int {
	if c.Spines == 0 {
		return 0
	}
	n := 0
	for _, l := range c.Leaf {
		n = max(n, l+1)
	}
	return n
}

// linkRate returns the rates of the link between leaf l and spine s.
func (c *Config) linkRate(l, s int) (up, down int64) {
	up, down = c.SpineRate, c.SpineRate
	for _, r := range c.LinkRates {
		if r.Leaf == l && r.Spine == s {
			if r.Up != 0 {
				up = r.Up
			}
			if r.Down != 0 {
				down = r.Down
			}
		}
	}
	return up, down
}

// CommodityConfig is the commodity personality's trimming (SAI packet trimming).
type CommodityConfig struct {
	// TrimSize is the length a trimmed frame is cut to, in bytes. Zero means 128.
	TrimSize int
	// DataDSCP marks trim-eligible frames. Zero means 10 (AF11).
	DataDSCP uint8
	// ControlDSCP marks frames for the high-priority queue. Zero means 46 (EF).
	ControlDSCP uint8
	// TrimDSCP is written into a trimmed frame. Zero means 46.
	TrimDSCP uint8
}

// ErrConfig is returned (wrapped) for an invalid Config.
var ErrConfig = errors.New("softswitch: invalid config")

func (c *Config) populate() {
	if c.Rate == 0 {
		c.Rate = 10e9
	}
	if c.SpineRate == 0 {
		c.SpineRate = c.Rate
	}
	if c.OtherQueue == 0 {
		c.OtherQueue = 100
	}
	if c.NDPPort == 0 {
		c.NDPPort = 6420
	}
	if c.Horizon == 0 {
		c.Horizon = c.Tick + 20*time.Microsecond
	}
	if c.CatchUp == 0 {
		c.CatchUp = 20 * time.Millisecond
	}
	if c.Spin == 0 {
		c.Spin = 20 * time.Microsecond
	}
	if c.Priority == 0 {
		c.Priority = 1
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Commodity.populate()
}

// DefaultCommodity returns the commodity personality's defaults (the zero
// CommodityConfig's values).
func DefaultCommodity() CommodityConfig {
	var c CommodityConfig
	c.populate()
	return c
}

func (cc *CommodityConfig) populate() {
	if cc.TrimSize == 0 {
		cc.TrimSize = 128
	}
	if cc.DataDSCP == 0 {
		cc.DataDSCP = 10
	}
	if cc.ControlDSCP == 0 {
		cc.ControlDSCP = 46
	}
	if cc.TrimDSCP == 0 {
		cc.TrimDSCP = 46
	}
}

func (c *Config) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	switch {
	case len(c.Ports) < 2:
		return bad("%d ports, want at least 2", len(c.Ports))
	case len(c.Ports) > maxPorts:
		return bad("%d ports, at most %d", len(c.Ports), maxPorts)
	case c.Rate < 1e6 || c.Rate > 400e9:
		return bad("Rate %d b/s, want 1M..400G", c.Rate)
	case c.OtherQueue < 1 || c.OtherQueue > 100000:
		return bad("OtherQueue %d, want 1..100000", c.OtherQueue)
	case c.HostQueue < 0 || c.HostQueue > 100000:
		return bad("HostQueue %d, want 0..100000", c.HostQueue)
	case c.FrameOverhead < 0 || c.FrameOverhead > 64:
		return bad("FrameOverhead %d, want 0..64", c.FrameOverhead)
	case c.OtherECN < 0:
		return bad("OtherECN %d < 0", c.OtherECN)
	case c.Personality > TrimCommodity:
		return bad("unknown Personality %d", c.Personality)
	case c.Horizon < 0 || c.Horizon > time.Millisecond:
		return bad("Horizon %v, want 0..1ms", c.Horizon)
	case c.Tick < 0 || c.Tick > time.Millisecond:
		return bad("Tick %v, want 0..1ms", c.Tick)
	case c.Priority > 99:
		return bad("Priority %d, want at most 99 (SCHED_FIFO)", c.Priority)
	case c.CatchUp < 0 || c.CatchUp > 100*time.Millisecond:
		return bad("CatchUp %v, want 0..100ms", c.CatchUp)
	case c.Commodity.TrimSize < 64 || c.Commodity.TrimSize > 1500:
		return bad("Commodity.TrimSize %d, want 64..1500", c.Commodity.TrimSize)
	case c.Commodity.DataDSCP > 63 || c.Commodity.ControlDSCP > 63 || c.Commodity.TrimDSCP > 63:
		return bad("a DSCP value above 63")
	}
	if err := c.validateFabric(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range c.Ports {
		if p == "" || seen[p] {
			return bad("port %q empty or listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

func (c *Config) validateFabric() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	if c.Spines == 0 {
		if len(c.Leaf) > 0 || len(c.LinkRates) > 0 {
			return bad("Leaf or LinkRates set without Spines")
		}
		return nil
	}
	if c.Spines < 0 || c.Spines > maxSpines {
		return bad("Spines %d, want 0..%d", c.Spines, maxSpines)
	}
	if len(c.Leaf) != len(c.Ports) {
		return bad("%d Leaf entries for %d ports", len(c.Leaf), len(c.Ports))
	}
	n := c.leaves()
	if n < 2 || n > maxLeaves {
		return bad("%d leaves, want 2..%d", n, maxLeaves)
	}
	has := make([]bool, n)
	for _, l := range c.Leaf {
		if l < 0 {
			return bad("leaf %d < 0", l)
		}
		has[l] = true
	}
	for l, ok := range has {
		if !ok {
			return bad("leaf %d has no port", l)
		}
	}
	rateOK := func(r int64) bool { return r >= 1e6 && r <= 400e9 }
	if !rateOK(c.SpineRate) {
		return bad("SpineRate %d b/s, want 1M..400G", c.SpineRate)
	}
	for _, r := range c.LinkRates {
		if r.Leaf < 0 || r.Leaf >= n || r.Spine < 0 || r.Spine >= c.Spines {
			return bad("LinkRates: no link between leaf %d and spine %d", r.Leaf, r.Spine)
		}
		if r.Up != 0 && !rateOK(r.Up) || r.Down != 0 && !rateOK(r.Down) {
			return bad("LinkRates leaf %d spine %d: rate outside 1M..400G", r.Leaf, r.Spine)
		}
	}
	return nil
}

// Fabric size bounds.
const (
	maxSpines = 16
	maxLeaves = 16
)

// maxPorts bounds the port count (a MAC table entry is a uint8).
const maxPorts = 64

package fabric

import (
	"fmt"

	"github.com/ndpstack/ndpstack/ndp"
)

// Opportunistic forwarding of pre-credit packets (OPF, papers/opf-proactive-transport.txt
// section II): when the output port routing chose for a packet its sender pushed
// without a PULL holds more than Threshold data packets, the switch sends the packet
// out of the less loaded of two other ports picked at random instead, so it waits in an
// idle neighbour's buffer and comes back, rather than being trimmed here. Each detour
// decrements the IPv4 TTL (the header checksum fixed incrementally); a packet whose TTL
// shows MaxDetours detours already (DCC = 64 - TTL: NDP senders send TTL 64 and the
// simulated fabric does not decrement it otherwise) is forwarded normally. Pulled
// packets, headers and control frames are never detoured.

// DetourConfig configures a Detour. The zero value takes the defaults below.
type DetourConfig struct {
	// Threshold is the data-queue depth, in packets, above which a pre-credit packet
	// is detoured. Zero means 4 (the paper sets opf-thresh 4 to 12 packets under the
	// queue's capacity; 4 under NDP's 8).
	Threshold int
	// MaxDetours caps the detours of one packet (the paper's dcc-thresh). Zero means 2.
	MaxDetours int
	// Seed seeds the random port picks.
	Seed uint64
}

// DetourStats counts a Detour's decisions.
type DetourStats struct {
	Detoured uint64 // packets sent out of another port
	Capped   uint64 // packets that met a congested port after MaxDetours detours
}

// Detour is one switch's OPF forwarding decision. It is not safe for concurrent use.
type Detour struct {
	cfg   DetourConfig
	rng   uint64
	stats DetourStats
}

// ndpTTL is the TTL NDP senders put in every frame.
const ndpTTL = 64

// NewDetour returns a Detour for cfg (zero fields take their defaults).
func NewDetour(cfg DetourConfig) (*Detour, error) {
	if cfg.Threshold == 0 {
		cfg.Threshold = 4
	}
	if cfg.MaxDetours == 0 {
		cfg.MaxDetours = 2
	}
	if cfg.Threshold < 0 || cfg.MaxDetours < 0 || cfg.MaxDetours >= ndpTTL {
		return nil, fmt.Errorf("%w: detour Threshold %d, MaxDetours %d", ErrConfig, cfg.Threshold, cfg.MaxDetours)
	}
	return &Detour{cfg: cfg, rng: cfg.Seed*0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D}, nil
}

// Stats returns the detour counters.
func (d *Detour) Stats() DetourStats { return d.stats }

// Route returns the port frame leaves by: port, the one routing chose, unless frame is
// pre-credit data, port's data queue holds more than Threshold packets and the frame
// has been detoured fewer than MaxDetours times; then the less loaded of two ports
// drawn at random from candidates (ports leading to other switches; port itself is
// skipped), with the frame's TTL decremented. ports are the switch's output ports,
// indexed as port and candidates are.
func (d *Detour) Route(frame []byte, port int, ports []*Port, candidates []int) int {
	if ports[port].data.len() <= d.cfg.Threshold || !ndp.IsPreCredit(frame) {
		return port
	}
	const ttlOff = 14 + 8
	if ndpTTL-int(frame[ttlOff]) >= d.cfg.MaxDetours {
		d.stats.Capped++
		return port
	}
	a, ok1 := d.pick(port, candidates)
	b, ok2 := d.pick(port, candidates)
	if !ok1 || !ok2 {
		return port
	}
	if ports[b].data.len() < ports[a].data.len() {
		a = b
	}
	decTTL(frame)
	d.stats.Detoured++
	return a
}

// pick draws a candidate other than port.
func (d *Detour) pick(port int, candidates []int) (int, bool) {
	n := len(candidates)
	for try := 0; try < 4; try++ {
		d.rng ^= d.rng >> 12
		d.rng ^= d.rng << 25
		d.rng ^= d.rng >> 27
		c := candidates[int((d.rng*0x2545F4914F6CDD1D)>>33)%n]
		if c != port {
			return c, true
		}
	}
	return 0, false
}

// decTTL decrements an IPv4 frame's TTL, fixing the header checksum incrementally
// (RFC 1624).
func decTTL(f []byte) {
	const ipOff = 14
	ndp.SetIPv4Word(f[ipOff:], 8, uint16(f[ipOff+8]-1)<<8|uint16(f[ipOff+9]))
}

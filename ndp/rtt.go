package ndp

import (
	"math/bits"
	"time"
)

// Adaptive retransmission timeout (RFC 6298 style), per connection.
//
// Samples. An RTT sample is the time from sending a DATA packet to its ACK.
// Karn's rule: an ACK is a sample only if it is known which transmission it
// answers. NDP can often tell: an ACK echoes the path id of the copy it
// answers, and a resend never takes the path of the copy before it, so after
// an RTO resend the ACK's path names the copy, as TCP's timestamps or QUIC's
// packet numbers would (pktDesc.karn: two copies are told apart, with more
// only the first, the one a spurious RTO leaves, and only while no later copy
// shares its path; a merged ACK frame (FlagAckMore) echoes the path of its
// own packet, Seq, which is used, and none for the packets of its bitmap,
// which are not). Without this, a one-packet RPC whose RTT exceeds
// the initial RTO never got a sample (every ACK came after a resend) and every
// call retransmitted. An ACK of the first copy after the RTO declared it lost
// proves that RTO spurious (Stats.SpuriousRTOs). A retransmission asked for by
// a NACK or a bounced header is not ambiguous: the first copy's payload was cut
// (or refused for lack of buffer) and cannot be ACKed, so its ACK is a valid
// sample, timed from the retransmission. NACKs themselves give no sample: they
// come back through the switches' header queue, so they measure the header
// path, which is shorter than the data path whose ACK the RTO has to wait for;
// mixing the two would pull SRTT down and leave the RTO too short for queued
// data. A packet that was stall-probed gives no sample (a re-ACK of the probe
// would time the probe).
//
// Estimate. SRTT with gain 1/8 and the first sample R giving SRTT = R,
// RTTVAR = R/2, as in RFC 6298; base RTO = clamp(max(SRTT + max(G, 4*RTTVAR),
// 2*late), Config.RTO, Config.MaxRTO) with G = rttGranularity (late: see
// Late peers below). NDP ACKs every packet,
// so a connection takes a sample per packet, not per RTT; with RFC 6298's
// per-sample gain RTTVAR would shrink within a single calm window and the next
// late batch of ACKs would find the RTO too short (seen on a loaded VM: 1-2ms
// RTTs with a tail to 30ms). So RTTVAR is kept as Linux does
// (tcp_rtt_estimator): the mean deviation MDEV (gain 1/4; a sample below SRTT
// raises it with gain 1/32 only) feeds RTTVAR at once when it grows, and
// RTTVAR decays toward the largest MDEV of the last round by 1/4 once per
// round, a round being one SRTT of time.
//
// Late peers. The ACK of a packet comes from the peer's stack, which runs
// only when its threads do: a peer descheduled for a few milliseconds (a
// sleeper woken late, a loaded host) answers that late once in thousands of
// exchanges, and between such spikes the samples are microseconds, so the
// estimate above forgets a spike within a few dozen exchanges and every
// spike fired the RTO at its floor on a connection that lost nothing. An ACK
// of a copy an RTO declared lost (a spurious RTO, told apart by path, see
// Karn above) is remembered: late is the largest such sample, halved every
// lateHalfLife (1s), and the base RTO is at least 2*late. So one spurious
// RTO raises the RTO above that peer's scheduling delay for seconds, and a
// real loss is then found up to 2*late after the send instead of after the
// floor (NDP finds most losses from trimmed headers, without the RTO). The
// delay is the peer host's, not one connection's: the address's memory in
// the seeds (below) counts for every connection to that address at once,
// open or new (Endpoint.rto: the RTO is at least 2*the address's late), so
// one spurious RTO covers a host's other connections too (8 persistent
// connections to one server fired once per connection per spike before).
//
// Host stalls. The host itself is held off the CPU the same way, and tells
// the endpoint (NoteStall: the engine's spinning waiters, and ndpd's core
// loop, see the gap between two of their polls). A stall of RTO/4 or more is
// remembered like a late peer, for every connection at once: the RTO is at
// least twice the longest, halved every lateHalfLife. The reasons: a host
// that was not running found its peers' answers missing for the same span,
// and on a VM the vCPUs stall together, so its peers, on the same host or on
// machines like it, stall as long; and a stack whose own frames left late,
// or that checks its timers late, would otherwise declare them lost before
// the peer could answer. A loss is then found up to twice the host's longest
// recent stall after the send, on a host where a stall that long recurs
// anyway.
//
// Backoff. Each counted timeout round (an RTO expiry or a stall probe, see
// timeoutRound) doubles the connection's RTO and stall interval, up to MaxRTO.
// The doubling is undone only by a valid sample (Karn: with every packet timing
// out early, ACKs of retransmissions must not bring the short RTO back, or the
// estimator never gets a sample). The give-up count (rtoStreak) is separate and
// is reset by any feedback, as before.
//
// Seeding. RPC traffic opens a connection per call, too short to learn
// anything itself, so a new connection starts from the endpoint's estimate for
// its destination: a direct-mapped table of rttCacheSize entries keyed by the
// remote IPv4 address, fed by every sample of every connection to that
// address, and an endpoint-wide estimator fed by all samples as the fallback
// for an address not in the table. A fixed array in the Endpoint: no
// allocation, bounded memory (rttCacheSize*72 bytes, 18 KB); a colliding address
// replaces the entry. The latency that makes ACKs late is mostly the peer
// host's (scheduling, polling) and the path to it, hence per address; the
// endpoint-wide value covers the local host's own delay. Entries do not age:
// a stale value is bounded by [RTO, MaxRTO] and the connection's own samples
// override it within a few RTTs (a seed counts as an existing estimate, so
// the first sample is averaged into it, not substituted for it).

const (
	// rttGranularity is G of RFC 6298: the smallest RTTVAR term, so a path
	// with perfectly regular samples still gets a margin above SRTT.
	rttGranularity = Time(10 * time.Microsecond)
	// rttCacheSize is the number of per-destination seed entries.
	rttCacheSize = 256
	// RTTHistBuckets is the number of buckets of Stats.RTTHist.
	RTTHistBuckets = 18
)

// rttEstimator is one SRTT/RTTVAR estimate (see the top of this file).
type rttEstimator struct {
	srtt       Time
	mdev       Time // mean deviation, gain 1/4
	mdevMax    Time // largest mdev this round
	rttvar     Time // max(mdev) over recent rounds, decaying by 1/4 per round
	roundAt    Time // start of the current round
	lateMemory      // the largest sample that proved an RTO spurious
	valid      bool // holds an estimate (sampled or seeded)
}

// lateMemory remembers the largest delay noted, halved every lateHalfLife.
type lateMemory struct {
	late   Time
	lateAt Time // when late was last set or halved
}

// lateHalfLife is how fast the memory of a late peer (rttEstimator.late)
// fades: a spike of the peer's scheduling delay recurs on a timescale of
// seconds, not of SRTTs.
const lateHalfLife = Time(time.Second)

// noteLate records a delay m at now: for an estimator, that an RTO fired on
// a packet whose first copy was then ACKed m after it was sent (the peer
// was late, nothing was lost).
func (r *lateMemory) noteLate(m, now Time) {
	r.decayLate(now)
	if m > r.late {
		r.late, r.lateAt = m, now
	}
}

// lateNow is late as decayLate(now) would leave it, r unchanged.
func (r *lateMemory) lateNow(now Time) Time {
	l := r.late
	for t := r.lateAt; l > 0 && now-t >= lateHalfLife; t += lateHalfLife {
		if l /= 2; l < rttGranularity {
			l = 0
		}
	}
	return l
}

// decayLate halves late once per lateHalfLife since lateAt.
func (r *lateMemory) decayLate(now Time) {
	for r.late > 0 && now-r.lateAt >= lateHalfLife {
		r.late /= 2
		r.lateAt += lateHalfLife
		if r.late < rttGranularity {
			r.late = 0
		}
	}
}

func (r *rttEstimator) sample(m, now Time) {
	if !r.valid {
		*r = rttEstimator{srtt: m, mdev: m / 2, mdevMax: m / 2, rttvar: m / 2, roundAt: now, valid: true}
		return
	}
	err := m - r.srtt
	r.srtt += err / 8
	d := err
	if d < 0 {
		d = -d
	}
	d -= r.mdev
	if err < 0 && d > 0 {
		d /= 8 // an RTT well below SRTT must not inflate the deviation
	}
	r.mdev += d / 4
	if r.mdev > r.mdevMax {
		r.mdevMax = r.mdev
		r.rttvar = max(r.rttvar, r.mdevMax)
	}
	if now-r.roundAt >= r.srtt {
		r.rttvar -= max(0, r.rttvar-r.mdevMax) / 4
		r.mdevMax = 0
		r.roundAt = now
	}
	r.decayLate(now)
}

// seeded returns a copy of r to start a new connection from at now.
func (r *rttEstimator) seeded(now Time) rttEstimator {
	c := *r
	c.mdevMax, c.roundAt = 0, now
	return c
}

// rto is clamp(max(SRTT + max(G, 4*RTTVAR), 2*late), lo, hi); lo without
// an estimate.
func (r *rttEstimator) rto(lo, hi Time) Time {
	if !r.valid {
		return lo
	}
	return min(max(r.srtt+max(rttGranularity, 4*r.rttvar), 2*r.late, lo), hi)
}

// rttDest is the memory of one remote address: the seed estimate and the
// host's silent-flight state (timers.go: the host's rule), which is
// sender.rackSent / holdUntil / heldAt over all connections to the address.
type rttDest struct {
	ip        uint32
	est       rttEstimator
	rackSent  Time // send time of the latest copy to this host known to have arrived
	holdUntil Time // host-silent packets are not declared lost before this (0: no hold)
	heldAt    Time // when the current hold began (the fire that started it)
}

// rttSeeds is the endpoint-level memory that seeds new connections.
type rttSeeds struct {
	all  rttEstimator
	dest [rttCacheSize]rttDest
}

func rttSlot(ip uint32) int { return int((ip * 0x9E3779B1) >> (32 - 8)) }

func (s *rttSeeds) sample(ip uint32, m, now Time) {
	s.all.sample(m, now)
	d := &s.dest[rttSlot(ip)]
	if !d.est.valid || d.ip != ip {
		*d = rttDest{ip: ip}
	}
	d.est.sample(m, now)
}

// noteLate records a late ACK (rttEstimator.noteLate) of a connection to ip
// in the seeds, after its sample m was fed to them.
func (s *rttSeeds) noteLate(ip uint32, m, now Time) {
	s.all.noteLate(m, now)
	if d := &s.dest[rttSlot(ip)]; d.est.valid && d.ip == ip {
		d.est.noteLate(m, now)
	}
}

// host returns the entry of address ip, nil when the table holds none for
// it (not sampled yet, or a colliding address took the slot).
func (s *rttSeeds) host(ip uint32) *rttDest {
	if d := &s.dest[rttSlot(ip)]; d.est.valid && d.ip == ip {
		return d
	}
	return nil
}

// arrived records that a copy sent to ip at sentAt was ACKed (a valid
// sample): ip's host answers what was sent up to then, and a hold that
// began at or before sentAt ends (the fire's resend, or something later,
// got through).
func (s *rttSeeds) arrived(ip uint32, sentAt Time) {
	d := s.host(ip)
	if d == nil || sentAt <= d.rackSent {
		return
	}
	d.rackSent = sentAt
	if d.holdUntil != 0 && sentAt >= d.heldAt {
		d.holdUntil = 0
	}
}

// late is the late-peer memory of address ip at now (0: none kept).
func (s *rttSeeds) late(ip uint32, now Time) Time {
	if d := &s.dest[rttSlot(ip)]; d.est.valid && d.ip == ip && d.est.late > 0 {
		return d.est.lateNow(now)
	}
	return 0
}

// seed returns the estimate a new connection to ip starts from at now.
func (s *rttSeeds) seed(ip uint32, now Time) rttEstimator {
	if d := &s.dest[rttSlot(ip)]; d.est.valid && d.ip == ip {
		return d.est.seeded(now)
	}
	if s.all.valid {
		return s.all.seeded(now)
	}
	return rttEstimator{}
}

// rttState is a connection's estimator, its base RTO and its backoff.
type rttState struct {
	est     rttEstimator
	base    Time   // clamp(SRTT + max(G, 4*RTTVAR), RTO, MaxRTO); InitialRTO without an estimate
	backoff uint8  // doublings since the last valid sample (timeout rounds)
	seeded  bool   // est came from the endpoint's memory
	samples uint32 // own valid samples
}

// backedOff doubles d backoff times, but not beyond limit; a d already at or
// beyond limit is not backed off.
func backedOff(d Time, backoff uint8, limit Time) Time {
	if d >= limit {
		return d
	}
	for range backoff {
		if d *= 2; d >= limit {
			return limit
		}
	}
	return d
}

// maxBackoff bounds rttState.backoff (doublings beyond MaxRTO change nothing).
const maxBackoff = 32

// rto is c's current retransmission timeout: the base RTO, at least twice
// the late-peer memory of c's remote address (see Late peers) and twice the
// host's own longest recent stall (Host stalls), doubled per unanswered
// timeout round, up to MaxRTO. Config.RTO with FixedRTO.
func (e *Endpoint) rto(c *conn) Time {
	if e.cfg.FixedRTO {
		return Time(e.cfg.RTO)
	}
	r := &c.snd.rtt
	hi := Time(e.cfg.MaxRTO)
	base := r.base
	l := e.seeds.late(c.key.remoteIP, e.now)
	if e.hostStall.late > 0 {
		l = max(l, e.hostStall.lateNow(e.now))
	}
	if 2*l > base {
		base = min(2*l, hi)
	}
	return backedOff(base, r.backoff, hi)
}

// NoteStall tells the endpoint that its host did not run it for d, up to
// now: the thread that polls it was descheduled, the VM stalled, a transmit
// kick or a GC pause took that long. A stall of a quarter of Config.RTO or
// more is remembered as a late peer is (see Host stalls at the top of this
// file): every connection's RTO is at least twice the longest, halved every
// lateHalfLife. FixedRTO ignores it.
func (e *Endpoint) NoteStall(d, now Time) {
	if e.cfg.FixedRTO || d < Time(e.cfg.RTO)/4 {
		return
	}
	e.now = max(e.now, now)
	e.hostStall.noteLate(d, e.now)
	e.stats.HostStalls++
}

// stallTimeout is how long a stalled sender waits for feedback before it
// probes: StallTimeout plus twice the amount by which the connection's base RTO
// exceeds the minimum (twice the base RTO with defaults), backed off like the
// RTO, at most max(MaxRTO, StallTimeout). Config.StallTimeout with FixedRTO.
func (e *Endpoint) stallTimeout(c *conn) Time {
	st := Time(e.cfg.StallTimeout)
	if e.cfg.FixedRTO {
		return st
	}
	r := &c.snd.rtt
	limit := max(Time(e.cfg.MaxRTO), st)
	return min(backedOff(st+2*(r.base-Time(e.cfg.RTO)), r.backoff, limit), limit)
}

// seedRTT starts c's estimator from the endpoint's memory for its remote.
func (e *Endpoint) seedRTT(c *conn, now Time) {
	est := e.seeds.seed(c.key.remoteIP, now)
	c.snd.rtt = rttState{est: est, seeded: est.valid}
	e.setBaseRTO(c)
}

func (e *Endpoint) setBaseRTO(c *conn) {
	r := &c.snd.rtt
	if r.est.valid {
		r.base = r.est.rto(Time(e.cfg.RTO), Time(e.cfg.MaxRTO))
	} else {
		r.base = Time(e.cfg.InitialRTO) // no estimate yet (Config.InitialRTO)
	}
	if !e.cfg.FixedRTO {
		// path exclusion lasts 16 RTOs: losses are only seen at RTO timescale
		c.paths.excludeFor = 16 * r.base
	}
	used := time.Duration(r.base)
	if e.cfg.FixedRTO {
		used = e.cfg.RTO
	}
	if e.stats.RTOMin == 0 || used < e.stats.RTOMin {
		e.stats.RTOMin = used
	}
	e.stats.RTOMax = max(e.stats.RTOMax, used)
}

// rttSample feeds one valid RTT sample m of connection c, taken at now;
// spurious: the ACK answered a copy an RTO had declared lost (the peer was
// late), which the estimator remembers (rttEstimator.late).
func (e *Endpoint) rttSample(c *conn, m, now Time, spurious bool) {
	if m < 0 {
		return // the host passed an earlier now than the send's
	}
	r := &c.snd.rtt
	r.est.sample(m, now)
	r.samples++
	e.seeds.sample(c.key.remoteIP, m, now)
	if spurious {
		r.est.noteLate(m, now)
		e.seeds.noteLate(c.key.remoteIP, m, now)
	}
	e.stats.RTTSamples++
	e.stats.RTTHist[rttBucket(m)]++
	e.setBaseRTO(c)
	if r.backoff > 0 {
		// the backed-off deadline may lie far beyond what the RTO now is
		r.backoff = 0
		if s := &c.snd; s.rtoAt != 0 {
			s.rtoAt = min(s.rtoAt, now+e.rto(c))
		}
	}
}

// rttBucket: bucket 0 holds samples below 1µs, bucket i in [1, n-2] holds
// [2^(i-1), 2^i) µs, the last bucket everything from 2^(n-2) µs (131 ms) up.
func rttBucket(m Time) int {
	return min(bits.Len64(uint64(m/1000)), RTTHistBuckets-1)
}

// RTTInfo is a connection's RTT estimate and timeouts (Endpoint.RTT).
type RTTInfo struct {
	SRTT, RTTVar time.Duration // smoothed RTT and its mean deviation (0 without an estimate)
	BaseRTO      time.Duration // clamp(max(SRTT + max(G, 4*RTTVar), 2*late), RTO, MaxRTO) (rtt.go)
	RTO          time.Duration // in force now: BaseRTO after backoff (Config.RTO with FixedRTO)
	Backoff      int           // doublings since the last valid sample
	Samples      int           // valid (Karn) samples taken by this connection
	Seeded       bool          // started from the endpoint's estimate for the remote
}

// RTT returns the RTT estimate and timeouts of connection h.
func (e *Endpoint) RTT(h Handle) (RTTInfo, bool) {
	c := e.conn(h)
	if c == nil {
		return RTTInfo{}, false
	}
	r := &c.snd.rtt
	info := RTTInfo{
		BaseRTO: time.Duration(r.base), RTO: time.Duration(e.rto(c)),
		Backoff: int(r.backoff), Samples: int(r.samples), Seeded: r.seeded,
	}
	if r.est.valid {
		info.SRTT, info.RTTVar = time.Duration(r.est.srtt), time.Duration(r.est.rttvar)
	}
	return info, true
}

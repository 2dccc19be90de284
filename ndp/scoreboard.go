package ndp

import "math"

// Scoreboard is a connection's per-path record (paper section 3.2.3). The
// sender sprays packets over a randomly permuted list of its paths and
// re-permutes after each round. ACKs, NACKs (including bounced headers)
// and losses (RTO) are counted per path; at each re-permutation a path
// whose NACK ratio stands out from the better half of the paths, whose
// loss count is an outlier, or which lost packets and delivered none while
// another path delivers (a failed link), is left out for a while
// (excludeFor, 16 RTOs by default: losses are only detected at RTO
// timescale), after which its counters are reset and it rejoins. At most
// half of the paths are excluded at once.
type Scoreboard struct {
	n      int
	perm   []uint8 // current round order (active paths only)
	plen   int
	pos    int
	acks   []uint32
	nacks  []uint32
	losses []uint32
	excl   []Time  // excluded until (0 = active)
	order  []uint8 // scratch for repermute: sampled active paths by NACK ratio
	// clean: no path has a count or an exclusion since the reset, so a
	// round is every path shuffled (a new connection's first permutation
	// skips the scoring; the same rng draws, so the same order).
	clean bool

	excludeFor Time
}

const (
	minPathSamples = 8
	// nackSignificance is how many standard deviations (binomial, at the
	// NACK ratio over all paths, at least one NACK) a path's NACKs must
	// exceed what the better half's ratio predicts for its samples. NACKs
	// that fall on every path alike, as in an incast where every path
	// shares the last hop, differ by chance only; the check runs at every
	// re-permutation, so the bound is wide (TestScoreboardKeepsUniformNacks:
	// 16 exclusions in 3,200 uniform runs at 5, none at 6; at 6 a bad path
	// needs more samples and the sweep's two-spine flows end later).
	nackSignificance = 5
	scoreDecayLimit  = 1 << 12 // halve a path's counters beyond this many samples
)

func newScoreboard(paths int, excludeFor Time) Scoreboard {
	return Scoreboard{
		excludeFor: excludeFor,
		n:          paths, perm: make([]uint8, paths),
		acks: make([]uint32, paths), nacks: make([]uint32, paths),
		losses: make([]uint32, paths), excl: make([]Time, paths),
		order: make([]uint8, paths), clean: true,
	}
}

func (s *Scoreboard) reset() {
	for i := 0; i < s.n; i++ {
		s.acks[i], s.nacks[i], s.losses[i], s.excl[i] = 0, 0, 0, 0
	}
	s.plen, s.pos, s.clean = 0, 0, true
}

func (s *Scoreboard) ack(p uint16) {
	if int(p) < s.n {
		s.acks[p]++
		s.clean = false
		s.decay(p)
	}
}

func (s *Scoreboard) nack(p uint16) {
	if int(p) < s.n {
		s.nacks[p]++
		s.clean = false
		s.decay(p)
	}
}

func (s *Scoreboard) loss(p uint16) {
	if int(p) < s.n {
		s.losses[p]++
		s.clean = false
	}
}

func (s *Scoreboard) decay(p uint16) {
	if s.acks[p]+s.nacks[p] > scoreDecayLimit {
		s.acks[p] /= 2
		s.nacks[p] /= 2
		s.losses[p] /= 2
	}
}

// next returns the path for the next packet. avoid, if < n, is a path the
// packet must not take (a retransmission goes on a different path) unless
// it is the only active path.
func (s *Scoreboard) next(r *rng, avoid int, now Time, excluded *uint64) uint16 {
	return s.next2(r, avoid, -1, now, excluded)
}

// next2 is next with a second path to stay off where the active paths
// allow it: the first copy's path for a packet the RTO resends again, so
// that an ACK of the first copy still names it (Karn, pktDesc.karn) and
// proves the RTO spurious. avoid is kept strictly (unless it is the only
// active path), avoid2 only when a third path is active.
func (s *Scoreboard) next2(r *rng, avoid, avoid2 int, now Time, excluded *uint64) uint16 {
	if s.pos >= s.plen {
		*excluded += uint64(s.repermute(r, now))
	}
	p := s.perm[s.pos]
	if (int(p) == avoid || int(p) == avoid2) && s.plen > 1 {
		// swap with a later path of this round if any, else with one the
		// round already used (spraying is preserved approximately,
		// "different path" strictly)
		j := s.other(avoid, avoid2)
		if j < 0 && int(p) == avoid {
			j = s.other(avoid, -1)
		}
		if j >= 0 {
			s.perm[s.pos], s.perm[j] = s.perm[j], s.perm[s.pos]
		}
		p = s.perm[s.pos]
	}
	s.pos++
	return uint16(p)
}

// other returns the index in this round's order of a path other than a and
// b: the first after pos, else the first before it; -1 if none.
func (s *Scoreboard) other(a, b int) int {
	for j := s.pos + 1; j < s.plen; j++ {
		if q := int(s.perm[j]); q != a && q != b {
			return j
		}
	}
	for j := 0; j < s.pos; j++ {
		if q := int(s.perm[j]); q != a && q != b {
			return j
		}
	}
	return -1
}

// repermute builds a new round: drop outliers, shuffle the rest. It returns
// the number of paths newly excluded.
func (s *Scoreboard) repermute(r *rng, now Time) int {
	if s.clean {
		s.plen = s.n
		for i := 0; i < s.n; i++ {
			s.perm[i] = uint8(i)
		}
		s.shuffle(r)
		return 0
	}
	for i := 0; i < s.n; i++ {
		if s.excl[i] != 0 && now >= s.excl[i] { // rejoin with a clean record
			s.excl[i] = 0
			s.acks[i], s.nacks[i], s.losses[i] = 0, 0, 0
		}
	}
	// The active paths with enough samples in ascending NACK ratio (an
	// insertion sort into scratch: n is small and nothing allocates), the
	// NACKs and samples over all of them, and the loss count over all
	// active paths.
	m := 0
	var allNacks, allSamples uint64
	var lossSum uint32
	active := 0
	delivering := false // an active path had feedback on 3 or more packets and fewer losses
	for i := 0; i < s.n; i++ {
		if s.excl[i] != 0 {
			continue
		}
		active++
		lossSum += s.losses[i]
		t := s.acks[i] + s.nacks[i]
		if t >= 3 && s.losses[i] < t {
			delivering = true
		}
		if t < minPathSamples {
			continue
		}
		allNacks += uint64(s.nacks[i])
		allSamples += uint64(t)
		j := m
		for ; j > 0; j-- {
			o := s.order[j-1]
			// nacks[i]/t < nacks[o]/t[o], without division
			if uint64(s.nacks[i])*uint64(s.acks[o]+s.nacks[o]) >= uint64(s.nacks[o])*uint64(t) {
				break
			}
			s.order[j] = o
		}
		s.order[j] = uint8(i)
		m++
	}
	// The reference is the pooled NACK ratio of the better half of those
	// paths (the ceil(m/2) lowest): with two spines half of a connection's
	// paths cross a degraded link, and a mean over all of them is pulled up
	// until none of them stands out.
	var ref, all float64
	if m >= 2 {
		var refNacks, refSamples uint64
		for k := 0; k < (m+1)/2; k++ {
			o := s.order[k]
			refNacks += uint64(s.nacks[o])
			refSamples += uint64(s.acks[o] + s.nacks[o])
		}
		ref = float64(refNacks) / float64(refSamples)
		all = float64(allNacks) / float64(allSamples)
	}
	newly := 0
	excludedNow := s.n - active
	// At most half of the paths are out at once, so a path is excluded
	// only while another stays in use: a connection never loses its last
	// path (a single-path connection never excludes it).
	maxExcl := s.n / 2
	for i := 0; i < s.n; i++ {
		if s.excl[i] != 0 {
			continue
		}
		if excludedNow >= maxExcl {
			continue
		}
		bad := false
		if t := s.acks[i] + s.nacks[i]; t >= minPathSamples && m >= 2 {
			// The path's NACKs beyond what the better half's ratio predicts
			// for its samples, against the binomial deviation at the ratio
			// over all paths (at least one NACK).
			excess := float64(s.nacks[i]) - float64(t)*ref
			sd := max(1, math.Sqrt(float64(t)*all*(1-all)))
			if float64(s.nacks[i]) > (2*ref+0.1)*float64(t) && excess > nackSignificance*sd {
				bad = true
			}
		}
		if active >= 2 {
			meanLoss := float64(lossSum) / float64(active)
			if s.losses[i] >= 3 && float64(s.losses[i]) > 3*meanLoss {
				bad = true
			}
			// A failed link: the path lost packets and delivered none
			// (no ACK, no NACK since it joined) while another path
			// delivers. With two spines half of the paths cross the
			// link, the mean above is half their count, and 3 x the
			// mean is more than any of them has. A path that delivers anything, however
			// slowly (a degraded link trims and NACKs), is left to the
			// NACK rule.
			if s.losses[i] >= 3 && s.acks[i]+s.nacks[i] == 0 && delivering {
				bad = true
			}
		}
		if bad {
			s.excl[i] = now + s.excludeFor
			if s.excl[i] == 0 {
				s.excl[i] = 1
			}
			excludedNow++
			newly++
		}
	}
	s.plen = 0
	for i := 0; i < s.n; i++ {
		if s.excl[i] == 0 {
			s.perm[s.plen] = uint8(i)
			s.plen++
		}
	}
	s.shuffle(r)
	return newly
}

// shuffle puts the round's plen paths in random order and starts the round.
func (s *Scoreboard) shuffle(r *rng) {
	for i := s.plen - 1; i > 0; i-- {
		j := r.intn(i + 1)
		s.perm[i], s.perm[j] = s.perm[j], s.perm[i]
	}
	s.pos = 0
}

// Excluded reports whether path p is currently left out.
func (s *Scoreboard) Excluded(p int) bool { return p < s.n && s.excl[p] != 0 }

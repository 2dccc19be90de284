package ndp

import "testing"

// TestScoreboardKeepsLastPath: the scoreboard never excludes a connection's
// last path. Whatever losses and NACKs the paths collect (one path failing,
// all failing alike, one path only), every round has a path to send on, a
// single-path connection never excludes it, and at most half of a
// connection's paths are out at once.
func TestScoreboardKeepsLastPath(t *testing.T) {
	for paths := 1; paths <= 8; paths++ {
		for pattern := 0; pattern < 4; pattern++ {
			sb := newScoreboard(paths, 1000)
			r := rng{s: uint64(paths*31 + pattern + 1)}
			var excluded uint64
			now := Time(1)
			for step := 0; step < 20000; step++ {
				p := sb.next(&r, -1, now, &excluded)
				if int(p) >= paths {
					t.Fatalf("paths %d pattern %d: path %d out of range", paths, pattern, p)
				}
				if sb.Excluded(int(p)) {
					t.Fatalf("paths %d pattern %d: sent on excluded path %d", paths, pattern, p)
				}
				// pattern 0: path 0 loses everything; 1: every path loses
				// everything; 2: path 0 is NACKed, the others ACKed; 3:
				// random mix.
				switch {
				case pattern == 0 && p == 0, pattern == 1:
					sb.loss(p)
					sb.nack(p)
				case pattern == 2 && p == 0:
					sb.nack(p)
				case pattern == 3 && r.intn(3) == 0:
					sb.loss(p)
				default:
					sb.ack(p)
				}
				out := 0
				for i := 0; i < paths; i++ {
					if sb.Excluded(i) {
						out++
					}
				}
				if out >= paths || out > paths/2 {
					t.Fatalf("paths %d pattern %d step %d: %d of %d paths excluded", paths, pattern, step, out, paths)
				}
				now += Time(r.intn(50))
			}
			if paths == 1 && excluded != 0 {
				t.Errorf("single path excluded %d times", excluded)
			}
			if paths >= 2 && pattern == 0 && excluded == 0 {
				t.Errorf("paths %d: a path losing every packet was never excluded", paths)
			}
		}
	}
}

// TestScoreboardExcludesBadHalf: when half of a connection's paths cross a
// degraded link (two spines, one link at a tenth of the rate) those paths are
// NACKed most of the time and the others rarely; each bad path is excluded
// and no good one is, although the mean over all paths is pulled up to half
// the bad paths' ratio.
func TestScoreboardExcludesBadHalf(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		sb := newScoreboard(8, 1<<40)
		r := rng{s: seed}
		var excluded uint64
		for step := 0; step < 2000; step++ {
			p := sb.next(&r, -1, 1, &excluded)
			bad := p%2 == 1 // the odd paths cross the degraded spine
			switch {
			case bad && r.intn(10) < 8, !bad && r.intn(100) < 2:
				sb.nack(p)
			default:
				sb.ack(p)
			}
		}
		for p := 0; p < 8; p++ {
			if sb.Excluded(p) != (p%2 == 1) {
				t.Fatalf("seed %d: path %d excluded %v, want %v (excluded %d)", seed, p, sb.Excluded(p), p%2 == 1, excluded)
			}
		}
	}
}

// TestScoreboardKeepsUniformNacks: in an incast every path shares the last
// hop, so NACKs fall on all paths alike and none of them is the path's fault:
// at NACK ratios from 2% to 60%, over many rounds and seeds, no path is
// excluded by chance.
func TestScoreboardKeepsUniformNacks(t *testing.T) {
	for _, paths := range []int{2, 4, 8, 16} {
		for _, pct := range []int{2, 10, 30, 60} {
			for seed := uint64(1); seed <= 10; seed++ {
				sb := newScoreboard(paths, 1<<40)
				r := rng{s: seed*1000 + uint64(pct)}
				var excluded uint64
				for step := 0; step < 5000; step++ {
					p := sb.next(&r, -1, 1, &excluded)
					if r.intn(100) < pct {
						sb.nack(p)
					} else {
						sb.ack(p)
					}
				}
				if excluded != 0 {
					t.Errorf("%d paths, %d%% NACKs on each, seed %d: %d paths excluded", paths, pct, seed, excluded)
				}
			}
		}
	}
}

// TestScoreboardExcludesFailedHalf: half of the paths lose every packet and
// deliver nothing (a failed link under two spines), the other half deliver
// everything. The loss outlier rule cannot see them (the mean is half their
// count); the failed-path rule excludes all of them within a few rounds,
// keeps the delivering ones, and after excludeFor lets them rejoin and
// leaves them out again. When no path delivers (a silent peer), nothing is
// excluded for lack of a delivering path.
func TestScoreboardExcludesFailedHalf(t *testing.T) {
	const excludeFor = 1000
	dead := func(p uint16) bool { return p%2 == 1 }
	sb := newScoreboard(8, excludeFor)
	r := rng{s: 7}
	var excluded uint64
	now := Time(1)
	send := func(rounds int, silent bool) {
		for range rounds * 8 {
			p := sb.next(&r, -1, now, &excluded)
			switch {
			case silent || dead(p):
				sb.loss(p)
			default:
				sb.ack(p)
			}
			now++
		}
	}
	send(5, false)
	for p := uint16(0); p < 8; p++ {
		if sb.Excluded(int(p)) != dead(p) {
			t.Fatalf("after 5 rounds path %d excluded %v, want %v (counters a %v n %v l %v)", p, sb.Excluded(int(p)), dead(p), sb.acks, sb.nacks, sb.losses)
		}
	}
	first := sb.excl[1]
	if first-now > excludeFor {
		t.Fatalf("first exclusion until %d at %d, want at most %d ahead", first, now, excludeFor)
	}
	// past the exclusion: the dead paths rejoin with a clean record, lose
	// again, and are left out again
	now = first
	send(5, false)
	for p := uint16(0); p < 8; p++ {
		if sb.Excluded(int(p)) != dead(p) {
			t.Fatalf("after rejoining, path %d excluded %v, want %v", p, sb.Excluded(int(p)), dead(p))
		}
	}
	if sb.excl[1] <= first {
		t.Fatalf("path 1 excluded until %d, want a new exclusion after %d", sb.excl[1], first)
	}
	if excluded != 8 {
		t.Fatalf("%d exclusions, want 8 (4 dead paths, twice)", excluded)
	}

	quiet := newScoreboard(8, excludeFor)
	sb, excluded = quiet, 0
	send(10, true)
	if excluded != 0 {
		t.Fatalf("a silent peer: %d exclusions, want 0 (no path delivers)", excluded)
	}
}

// TestScoreboardCleanRound: a scoreboard with no counts (a new or reset
// connection's) skips the scoring, and its rounds are the ones the scoring
// gives for the same rng draws; the first ACK ends the shortcut.
func TestScoreboardCleanRound(t *testing.T) {
	const excludeFor = 1000
	for seed := uint64(1); seed <= 200; seed++ {
		clean, scored := newScoreboard(8, excludeFor), newScoreboard(8, excludeFor)
		scored.clean = false // all counts zero: the full scoring, nothing excluded
		rc, rs := rng{s: seed}, rng{s: seed}
		var ec, es uint64
		for i := range 3 * 8 {
			pc, ps := clean.next(&rc, -1, Time(i), &ec), scored.next(&rs, -1, Time(i), &es)
			if pc != ps {
				t.Fatalf("seed %d packet %d: clean round path %d, scored %d", seed, i, pc, ps)
			}
		}
		if rc != rs || ec != 0 || es != 0 {
			t.Fatalf("seed %d: rng %v / %v, exclusions %d / %d", seed, rc, rs, ec, es)
		}
	}
	sb := newScoreboard(8, excludeFor)
	sb.ack(3)
	if sb.clean {
		t.Fatal("clean after an ACK")
	}
	sb.reset()
	if !sb.clean {
		t.Fatal("not clean after reset")
	}
}

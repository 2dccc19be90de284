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
			if paths >= 3 && pattern == 0 && excluded == 0 { // two paths: neither is an outlier of their mean
				t.Errorf("paths %d: a path losing every packet was never excluded", paths)
			}
		}
	}
}

package sim

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// leafSpineParams are ndpperf leafspine's simulator parameters: 100 Mb/s links, MTU
// 3500, 8 paths, IW 30, the RTO ndpperf derives for the link (4 x three 8-packet
// queues), 8-packet data queues.
func leafSpineParams(seed uint64) Params {
	const rate = 100e6
	rto := max(time.Millisecond, 4*3*8*time.Duration(int64(3500+14)*8*1e9/rate))
	return Params{LinkRate: rate, LinkDelay: 1000, Endpoint: ndp.Config{IW: 30, Paths: 8, RTO: rto, MTU: 3500},
		Fabric: fabric.Config{DataQueue: 8}, Seed: seed}
}

// leafSpinePermutation runs ndpperf leafspine's permutation (two leaves of two
// hosts, 4 MB flows) on spines spines, the leaf 1 - spine 1 link cut to a tenth of
// the rate when degraded.
func leafSpinePermutation(spines int, degraded bool, seed uint64) (PermutationResult, error) {
	p := leafSpineParams(seed)
	cfg := PermutationConfig{Size: 4e6, Clos: ClosConfig{Kind: LeafSpine, ECMP: ECMPPath, Leaves: 2, Spines: spines, HostsPerLeaf: 2, Params: p}}
	if degraded {
		cfg.Clos.Changes = []LinkChange{{Core: 1, Pod: 1, Rate: p.LinkRate / 10}}
	}
	return RunPermutation(cfg)
}

// TestScoreboardSweep runs the scenarios the path scoreboard's rule is judged by
// over many seeds and prints one line per scenario: where excluding is right (a
// two-spine leaf-spine with one spine link at a tenth of the rate, the same with
// four spines, a k=4 FatTree with one core link at a tenth) and where it is wrong
// (a healthy leaf-spine; incasts, where every path shares the last hop). It is
// slow, so it runs only with NDPSIM_SWEEP=1:
//
//	NDPSIM_SWEEP=1 go test -run TestScoreboardSweep -v ./internal/sim
func TestScoreboardSweep(t *testing.T) {
	if os.Getenv("NDPSIM_SWEEP") == "" {
		t.Skip("set NDPSIM_SWEEP=1 to run the scoreboard sweep")
	}
	seeds := func(n int) []uint64 {
		s := make([]uint64, n)
		for i := range s {
			s[i] = uint64(i + 1)
		}
		return s
	}
	type perm struct {
		name  string
		seeds []uint64
		run   func(seed uint64) (PermutationResult, error)
	}
	for _, pc := range []perm{
		{"leafspine 2 spines, degraded 10x", seeds(20), func(s uint64) (PermutationResult, error) { return leafSpinePermutation(2, true, s) }},
		{"leafspine 2 spines, failed link", seeds(20), func(s uint64) (PermutationResult, error) {
			p := leafSpineParams(s)
			cfg := PermutationConfig{Size: 4e6, Clos: ClosConfig{Kind: LeafSpine, ECMP: ECMPPath, Leaves: 2, Spines: 2, HostsPerLeaf: 2, Params: p,
				Changes: []LinkChange{{Core: 1, Pod: 1, Loss: 1}}}}
			return RunPermutation(cfg)
		}},
		{"leafspine 2 spines, healthy", seeds(20), func(s uint64) (PermutationResult, error) { return leafSpinePermutation(2, false, s) }},
		{"leafspine 4 spines, degraded 10x", seeds(10), func(s uint64) (PermutationResult, error) { return leafSpinePermutation(4, true, s) }},
		{"fattree k=4, core 0 - pod 0 at 1G", seeds(5), func(s uint64) (PermutationResult, error) {
			ft := fatTree(4, ECMPPath)
			ft.Seed = s
			ft.Changes = []LinkChange{{Core: 0, Pod: 0, Rate: 1e9}}
			return RunPermutation(PermutationConfig{Clos: ft, Size: 4_000_000})
		}},
		{"fattree k=4 ECMP hash, 500 KB", seeds(20), func(s uint64) (PermutationResult, error) {
			ft := fatTree(4, ECMPHash)
			ft.Seed = s
			return RunPermutation(PermutationConfig{Clos: ft, Size: 500_000})
		}},
		{"fattree k=4, healthy", seeds(5), func(s uint64) (PermutationResult, error) {
			ft := fatTree(4, ECMPPath)
			ft.Seed = s
			return RunPermutation(PermutationConfig{Clos: ft, Size: 4_000_000})
		}},
	} {
		start := time.Now()
		var med, slow, last []float64
		var excl uint64
		bad := 0
		for _, s := range pc.seeds {
			r, err := pc.run(s)
			if err != nil || !r.BytesVerified {
				bad++
				t.Logf("%s seed %d: %v verified %v", pc.name, s, err, r.BytesVerified)
				continue
			}
			rate := r.LinkGbps
			med = append(med, r.MedianFlowGbps/rate)
			slow = append(slow, r.MinFlowGbps/rate)
			last = append(last, r.LastFCTus/1e3)
			excl += r.PathsExcluded
			t.Logf("%s seed %d: median %.2f slowest %.2f last FCT %.2f ms excluded %d rtos %d", pc.name, s, r.MedianFlowGbps/rate, r.MinFlowGbps/rate, r.LastFCTus/1e3, r.PathsExcluded, r.RTOs)
		}
		t.Logf("SWEEP %-36s seeds %2d: median flow %s, slowest %s of the link; last completion %s ms; paths excluded %d; failed %d (%.1fs)",
			pc.name, len(pc.seeds), spread(med), spread(slow), spread(last), excl, bad, time.Since(start).Seconds())
	}
	type incast struct {
		name  string
		seeds []uint64
		cfg   func(seed uint64) IncastConfig
	}
	for _, ic := range []incast{
		{"star incast 8 x 1 MB, 8 paths", seeds(10), func(s uint64) IncastConfig {
			p := paperParams()
			p.Seed = s
			return IncastConfig{Star: StarConfig{LinkRate: p.LinkRate, LinkDelay: p.LinkDelay, Endpoint: ndp.Config{MTU: 9000, IW: 30, Paths: 8},
				Fabric: p.Fabric, Seed: s}, Senders: 8, Size: 1e6}
		}},
		{"star incast 32 x 256 KB, 8 paths", seeds(10), func(s uint64) IncastConfig {
			p := paperParams()
			return IncastConfig{Star: StarConfig{LinkRate: p.LinkRate, LinkDelay: p.LinkDelay, Endpoint: ndp.Config{MTU: 9000, IW: 30, Paths: 8},
				Fabric: p.Fabric, Seed: s}, Senders: 32, Size: 256e3}
		}},
		{"fattree k=4 incast 15 x 300 KB", seeds(10), func(s uint64) IncastConfig {
			ft := fatTree(4, ECMPHash)
			ft.Seed = s
			return IncastConfig{Clos: &ft, Senders: 15, Size: 300_000}
		}},
		{"fattree k=8 incast 100 x 135 KB", seeds(3), func(s uint64) IncastConfig {
			ft := fatTree(8, ECMPHash)
			ft.Seed = s
			return IncastConfig{Clos: &ft, Senders: 100, Size: 135_000}
		}},
		{"leafspine 2 spines incast 3 x 4 MB", seeds(10), func(s uint64) IncastConfig {
			c := ClosConfig{Kind: LeafSpine, ECMP: ECMPPath, Leaves: 2, Spines: 2, HostsPerLeaf: 2, Params: leafSpineParams(s)}
			return IncastConfig{Clos: &c, Senders: 3, Size: 4e6}
		}},
	} {
		start := time.Now()
		var over []float64
		var excl uint64
		bad := 0
		for _, s := range ic.seeds {
			r, err := RunIncast(ic.cfg(s))
			if err != nil || !r.BytesVerified {
				bad++
				t.Logf("%s seed %d: %v verified %v", ic.name, s, err, r.BytesVerified)
				continue
			}
			over = append(over, r.LastFCTus/r.OptimalUs)
			excl += r.PathsExcluded
			t.Logf("%s seed %d: last FCT %.3f x optimal, excluded %d", ic.name, s, r.LastFCTus/r.OptimalUs, r.PathsExcluded)
		}
		t.Logf("SWEEP %-36s seeds %2d: last completion %s x optimal; paths excluded %d; failed %d (%.1fs)",
			ic.name, len(ic.seeds), spread(over), excl, bad, time.Since(start).Seconds())
	}
}

// spread formats a sample as "median [min-max]".
func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	f := "%.2f [%.2f-%.2f]"
	if s[len(s)-1] >= 100 {
		f = "%.0f [%.0f-%.0f]"
	}
	return fmt.Sprintf(f, s[len(s)/2], s[0], s[len(s)-1])
}

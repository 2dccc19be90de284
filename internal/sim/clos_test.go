package sim

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

func paperParams() Params {
	return Params{
		LinkRate:  10e9,
		LinkDelay: 1000,
		Endpoint:  ndp.Config{MTU: 9000, IW: 30},
		Fabric:    fabric.Config{DataQueue: 8},
		Seed:      1,
	}
}

func fatTree(k int, ecmp ECMPMode) ClosConfig {
	return ClosConfig{Kind: FatTree, K: k, ECMP: ecmp, Params: paperParams()}
}

func TestClosConstruction(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		cfg                         ClosConfig
		hosts, edge, agg, core      int
		edgePorts, aggPorts, cPorts int
		edgeUp, aggUp, paths        int
	}{
		{"fattree k=4", fatTree(4, ECMPHash), 16, 8, 8, 4, 4, 4, 4, 2, 2, 4},
		{"fattree k=8", fatTree(8, ECMPHash), 128, 32, 32, 16, 8, 8, 8, 4, 4, 16},
		{"leafspine 3x2x5", ClosConfig{Kind: LeafSpine, Leaves: 3, Spines: 2, HostsPerLeaf: 5, Params: paperParams()},
			15, 3, 0, 2, 7, 0, 3, 2, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClos(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Hosts) != tc.hosts || len(c.Edge) != tc.edge || len(c.Agg) != tc.agg || len(c.Core) != tc.core {
				t.Fatalf("hosts %d edge %d agg %d core %d", len(c.Hosts), len(c.Edge), len(c.Agg), len(c.Core))
			}
			if len(c.Switches) != tc.edge+tc.agg+tc.core {
				t.Fatalf("%d switches", len(c.Switches))
			}
			check := func(tier string, sws []*Switch, ports, up int) {
				for _, sw := range sws {
					if sw.Ports() != ports || len(sw.Uplinks()) != up {
						t.Fatalf("%s %s: %d ports, %d uplinks; want %d, %d", tier, sw.Name, sw.Ports(), len(sw.Uplinks()), ports, up)
					}
				}
			}
			check("edge", c.Edge, tc.edgePorts, tc.edgeUp)
			check("agg", c.Agg, tc.aggPorts, tc.aggUp)
			check("core", c.Core, tc.cPorts, 0)
			if c.Paths != tc.paths || c.Hosts[0].EP.Config().Paths != tc.paths {
				t.Fatalf("paths %d, endpoint paths %d; want %d", c.Paths, c.Hosts[0].EP.Config().Paths, tc.paths)
			}
			// Every link has both ends: a source feeding it and a node receiving from it.
			for i, l := range c.Links {
				if !l.fed() || l.to == nil {
					t.Fatalf("link %d is not cabled", i)
				}
			}
		})
	}
	for _, bad := range []ClosConfig{
		{K: 3, Params: paperParams()},
		{K: 0, Params: paperParams()},
		{K: 66, Params: paperParams()}, // 71874 hosts: more than the address plan holds
		{Kind: LeafSpine, Leaves: 2, Spines: 0, HostsPerLeaf: 2, Params: paperParams()},
		{K: 4, ECMP: 9, Params: paperParams()},
		{K: 4, Changes: []LinkChange{{Core: 4, Pod: 0, Rate: 1e9}}, Params: paperParams()},
	} {
		if _, err := NewClos(bad); err == nil {
			t.Errorf("NewClos(%+v) accepted", bad)
		}
	}
}

// testFrame builds a DATA frame from host a to host b on UDP source port sport.
func testFrame(t *testing.T, a, b int, sport uint16) []byte {
	t.Helper()
	buf := make([]byte, ndp.MaxFrameLen(1500))
	f := ndp.Frame{SrcMAC: HostMAC(a), DstMAC: HostMAC(b), SrcIP: HostIP(a), DstIP: HostIP(b),
		SrcPort: sport, DstPort: ndp.DefaultPort,
		Header: ndp.Header{Type: ndp.TypeData, SrcPort: 1, DstPort: 2, ConnID: 1}, Payload: []byte{1}}
	n, err := ndp.BuildFrame(buf, &f)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// walk follows f's route from host a's NIC and returns the host it reaches, the links it
// crossed and the switches it visited.
func walk(t *testing.T, c *Clos, a int, f []byte) (int, int, []*Switch) {
	t.Helper()
	var visited []*Switch
	to := c.Hosts[a].NIC.to
	for links := 1; links <= 8; links++ {
		switch n := to.(type) {
		case *Host:
			return n.Index, links, visited
		case *Switch:
			visited = append(visited, n)
			i, ok := n.route(f)
			if !ok {
				t.Fatalf("%s has no route for the frame", n.Name)
			}
			to = n.links[i].to
		default:
			t.Fatalf("link to %T", to)
		}
	}
	t.Fatal("routing loop")
	return 0, 0, nil
}

// Every host reaches every other host on a shortest path, whatever the source port.
func TestClosEveryHostReachesEveryHost(t *testing.T) {
	for _, cfg := range []ClosConfig{
		fatTree(4, ECMPHash), fatTree(4, ECMPPath), fatTree(4, ECMPRandom), fatTree(8, ECMPHash),
		{Kind: LeafSpine, Leaves: 4, Spines: 3, HostsPerLeaf: 3, Params: paperParams()},
	} {
		c, err := NewClos(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ports := []uint16{0xC000, 0xC001, 0xC7A3, 0xFFFF}
		for a := range c.Hosts {
			for b := range c.Hosts {
				if a == b {
					continue
				}
				for _, p := range ports {
					got, links, _ := walk(t, c, a, testFrame(t, a, b, p))
					if got != b || links != c.Hops(a, b) {
						t.Fatalf("%s %v: %d -> %d on port %#x reached %d over %d links, want %d links",
							c.topology, cfg.ECMP, a, b, p, got, links, c.Hops(a, b))
					}
				}
			}
		}
	}
}

// Hash ECMP spreads distinct source ports evenly over an edge switch's uplinks and over
// the core; path ECMP maps a connection's k²/4 consecutive ports to k²/4 distinct cores.
func TestECMPSpreadsSourcePorts(t *testing.T) {
	const k = 8
	coreIndex := func(c *Clos, sws []*Switch) int {
		for _, sw := range sws {
			for i, core := range c.Core {
				if sw == core {
					return i
				}
			}
		}
		return -1
	}
	t.Run("hash", func(t *testing.T) {
		c, err := NewClos(fatTree(k, ECMPHash))
		if err != nil {
			t.Fatal(err)
		}
		const ports = 4096
		edge := c.Edge[0]
		up := map[int]int{}
		cores := make([]int, len(c.Core))
		for p := 0; p < ports; p++ {
			f := testFrame(t, 0, len(c.Hosts)-1, uint16(0xC000+p))
			i, _ := edge.route(f)
			up[i]++
			_, _, visited := walk(t, c, 0, f)
			cores[coreIndex(c, visited)]++
		}
		if len(up) != k/2 {
			t.Fatalf("ports used %d of %d uplinks", len(up), k/2)
		}
		mean := float64(ports) / float64(k/2)
		for i, n := range up {
			if float64(n) < 0.9*mean || float64(n) > 1.1*mean {
				t.Fatalf("uplink %d got %d of %d ports, want within 10%% of %.0f: %v", i, n, ports, mean, up)
			}
		}
		mean = float64(ports) / float64(len(cores))
		for i, n := range cores {
			if float64(n) < 0.75*mean || float64(n) > 1.25*mean {
				t.Fatalf("core %d got %d of %d ports, want within 25%% of %.0f: %v", i, n, ports, mean, cores)
			}
		}
	})
	t.Run("path", func(t *testing.T) {
		c, err := NewClos(fatTree(k, ECMPPath))
		if err != nil {
			t.Fatal(err)
		}
		for _, base := range []int{0, 5, 1000, 16384 - 16} {
			seen := map[int]bool{}
			for p := 0; p < c.Paths; p++ {
				f := testFrame(t, 3, len(c.Hosts)-2, uint16(0xC000+base+p))
				_, _, visited := walk(t, c, 3, f)
				seen[coreIndex(c, visited)] = true
			}
			if len(seen) != c.Paths {
				t.Fatalf("ports %d..%d reached %d distinct cores, want %d", base, base+c.Paths-1, len(seen), c.Paths)
			}
		}
	})
}

// A small FatTree incast completes with every byte verified, close to the optimum, and
// the same seed gives the same result.
func TestFatTreeIncast(t *testing.T) {
	ft := fatTree(4, ECMPHash)
	cfg := IncastConfig{Clos: &ft, Senders: 15, Size: 300_000}
	r, err := RunIncast(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if !r.BytesVerified || r.Completed != 15 || r.Topology != "fattree" || r.Hosts != 16 {
		t.Fatalf("not every byte verified: %+v", r)
	}
	if r.Trimmed == 0 || r.Nacks == 0 {
		t.Fatalf("a 15 × 30-packet first RTT must trim: %+v", r)
	}
	if r.OverheadPct < 0 || r.OverheadPct > 10 {
		t.Fatalf("overhead %.2f%% over optimal, want 0..10%%", r.OverheadPct)
	}
	again, err := RunIncast(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, r) {
		t.Fatalf("same seed, different results:\n%+v\n%+v", r, again)
	}
}

// The paper's Figure 4 incast (100 × 135 KB) in a k=8 FatTree: trimmed headers that
// overflow the header queue on the way down are returned to sender, not dropped, so no
// RTO fires.
func TestFatTreeIncastHundred(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	ft := fatTree(8, ECMPHash)
	r, err := RunIncast(IncastConfig{Clos: &ft, Senders: 100, Size: 135_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if !r.BytesVerified || r.Bounced == 0 || r.RTOs != 0 {
		t.Fatalf("want every byte, some bounces and no RTO: %+v", r)
	}
	if r.OverheadPct < 0 || r.OverheadPct > 5 {
		t.Fatalf("overhead %.2f%% over optimal, want 0..5%%", r.OverheadPct)
	}
}

// A k=4 permutation with sender-chosen paths keeps every flow near line rate; the same
// seed gives the same per-flow numbers.
func TestPermutationK4(t *testing.T) {
	cfg := PermutationConfig{Clos: fatTree(4, ECMPPath), Size: 2_000_000}
	r, err := RunPermutation(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("utilization %.1f%%, flows %v, uplink trims %.3f%%", r.UtilizationPct, r.FlowGbps, r.UplinkTrimPct)
	if !r.BytesVerified || r.Completed != 16 || len(r.FlowGbps) != 16 {
		t.Fatalf("not every byte verified: %+v", r.Result)
	}
	if r.UtilizationPct < 90 || r.MinFlowGbps < 8.5 {
		t.Fatalf("utilization %.1f%%, slowest flow %.2f Gb/s; want >= 90%% and >= 8.5 Gb/s", r.UtilizationPct, r.MinFlowGbps)
	}
	again, err := RunPermutation(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, again) {
		t.Fatalf("same seed, different results:\n%+v\n%+v", r, again)
	}
}

// Every host sends once and receives once, never to itself.
func TestDerangement(t *testing.T) {
	for _, n := range []int{2, 3, 16, 128} {
		p := derangement(n, uint64(n))
		seen := make([]bool, n)
		for i, v := range p {
			if v == i || seen[v] {
				t.Fatalf("n=%d: %v is not a derangement", n, p)
			}
			seen[v] = true
		}
	}
}

// A core link cut to a tenth of the rate (paper Figure 22's asymmetry) or failing
// outright: every byte still arrives, and the senders' scoreboards exclude the bad path.
// (Before the host re-armed its RTO after transmitting, the failed link left flows
// silent forever: a lost last packet with no later arrival never got its RTO.)
func TestPermutationWithBadCoreLink(t *testing.T) {
	for _, ch := range []LinkChange{{Core: 0, Pod: 0, Rate: 1e9}, {Core: 1, Pod: 1, Loss: 1}} {
		ft := fatTree(4, ECMPPath)
		ft.Changes = []LinkChange{ch}
		r, err := RunPermutation(PermutationConfig{Clos: ft, Size: 4_000_000})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v: utilization %.1f%%, min %.2f Gb/s, flows %v, rtos %d, lost %d, paths excluded %d",
			ch, r.UtilizationPct, r.MinFlowGbps, r.FlowGbps, r.RTOs, r.Lost, r.PathsExcluded)
		if !r.BytesVerified {
			t.Fatalf("%+v: bytes not verified: %+v", ch, r.Result)
		}
		if r.PathsExcluded == 0 {
			t.Fatalf("%+v: no path excluded: %+v", ch, r.Result)
		}
		if ch.Loss > 0 && r.Lost == 0 {
			t.Fatalf("the failed link lost nothing: %+v", r.Result)
		}
	}
}

// A permutation that no flow finishes before the limit says so, rather than
// reporting "the first flow finished at -0.0 us, before the warmup".
func TestPermutationNoFlowFinished(t *testing.T) {
	p := Params{LinkRate: 10e9, LinkDelay: 1000, Endpoint: ndp.Config{MTU: 9000, IW: 30}, Fabric: fabric.Config{DataQueue: 8}, Seed: 1}
	_, err := RunPermutation(PermutationConfig{Clos: ClosConfig{Kind: FatTree, K: 4, Params: p}, Size: 10e6,
		Warmup: 50e3, Limit: 200e3})
	if err == nil || !strings.Contains(err.Error(), "no flow finished within the 200.0 us limit") {
		t.Fatalf("err %v, want no flow finished within the limit", err)
	}
}

// Two spines, the leaf 1 - spine 1 link at a tenth of the rate (ndpperf leafspine
// --spines 2 --degrade 10 on the simulator), in seeds whose permutation sends all four
// flows across the spines: half of every flow's paths cross the degraded link, and the
// scoreboards exclude every one of them (4 per flow), so the slowest flow keeps a share
// of the good spine (the fabric allows about 0.5 of the link per flow: 110 Mb/s into a
// leaf for two flows). With a rule that compares each path with the mean over all, no
// bad path stood out in these seeds and the slowest flow got 0.00-0.14 of the link.
func TestLeafSpineTwoSpinesDegraded(t *testing.T) {
	for _, seed := range []uint64{1, 4, 10, 16} {
		r, err := leafSpinePermutation(2, true, seed)
		if err != nil {
			t.Fatal(err)
		}
		slowest := r.MinFlowGbps / r.LinkGbps
		t.Logf("seed %d: flows %v of %.1f Gb/s, slowest %.2f of the link, last completion %.0f ms, paths excluded %d, RTOs %d",
			seed, r.FlowGbps, r.LinkGbps, slowest, r.LastFCTus/1e3, r.PathsExcluded, r.RTOs)
		if !r.BytesVerified || r.Completed != 4 {
			t.Fatalf("seed %d: not every byte verified: %+v", seed, r.Result)
		}
		if r.PathsExcluded < 16 {
			t.Errorf("seed %d: %d paths excluded, want the 16 that cross the degraded link", seed, r.PathsExcluded)
		}
		if slowest < 0.2 {
			t.Errorf("seed %d: slowest flow %.2f of the link, want >= 0.2", seed, slowest)
		}
	}
}

// Two spines, the leaf 1 - spine 1 link losing every frame both ways (a failed
// link routing has not yet removed), in seeds whose permutation sends all four
// flows across the spines: half of every flow's paths are dead. Each sender's
// scoreboard leaves the four dead paths out after their first losses (they
// deliver nothing while the others deliver), ACKs and PULLs return by the path
// their data took (so a live path is live both ways), and every flow finishes
// at about the fabric's bound (two flows share leaf 1's one live spine link:
// 4 MB at half of 100 Mb/s is about 0.7 s). Before, the ACKs of the live paths
// of half the connections crossed the dead link, every path of theirs looked
// dead, nothing was excluded and no flow finished within 10 s.
func TestLeafSpineTwoSpinesFailed(t *testing.T) {
	for _, seed := range []uint64{1, 4} {
		p := leafSpineParams(seed)
		r, err := RunPermutation(PermutationConfig{Size: 4e6, Limit: 3e9, Clos: ClosConfig{Kind: LeafSpine, ECMP: ECMPPath,
			Leaves: 2, Spines: 2, HostsPerLeaf: 2, Params: p, Changes: []LinkChange{{Core: 1, Pod: 1, Loss: 1}}}})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Logf("seed %d: flows %v of %.1f Gb/s, last completion %.0f ms, paths excluded %d, RTOs %d, lost %d",
			seed, r.FlowGbps, r.LinkGbps, r.LastFCTus/1e3, r.PathsExcluded, r.RTOs, r.Lost)
		if !r.BytesVerified || r.Completed != 4 {
			t.Fatalf("seed %d: not every flow finished with every byte verified: %+v", seed, r.Result)
		}
		if r.PathsExcluded < 16 {
			t.Errorf("seed %d: %d paths excluded, want at least the 16 that cross the failed link", seed, r.PathsExcluded)
		}
		if r.LastFCTus > 1.5e6 {
			t.Errorf("seed %d: last completion %.0f ms, want <= 1500 (the fabric allows about 700)", seed, r.LastFCTus/1e3)
		}
		if slowest := r.MinFlowGbps / r.LinkGbps; slowest < 0.15 {
			t.Errorf("seed %d: slowest flow %.2f of the link, want >= 0.15", seed, slowest)
		}
	}
}

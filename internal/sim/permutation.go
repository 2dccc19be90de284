package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"

	"github.com/ndpstack/ndpstack/ndp"
)

// PermutationConfig is the paper's worst-case traffic matrix (section 6.1, Figure 14;
// sensitivity, Figure 17): every host sends one flow of Size bytes to another host,
// chosen at random so that every host also receives exactly one flow, all starting at
// time zero.
type PermutationConfig struct {
	Clos ClosConfig
	Size int64
	// Warmup is when the throughput window opens (after the first-RTT pushes settle).
	// Zero means a tenth of the time one flow needs alone at full link goodput.
	Warmup ndp.Time
	// Limit stops a run that has not finished by this virtual time. Zero means 10 s.
	Limit ndp.Time
}

// PermutationResult is a Result plus the per-flow throughput while every flow was
// running: from Warmup until the first flow completed.
type PermutationResult struct {
	Result
	WindowStartUs float64 `json:"window_start_us"`
	WindowEndUs   float64 `json:"window_end_us"`
	// Per-flow goodput (bytes the receiving application read) over the window.
	MeanFlowGbps   float64 `json:"mean_flow_gbps"`
	MinFlowGbps    float64 `json:"min_flow_gbps"`
	P10FlowGbps    float64 `json:"p10_flow_gbps"`
	MedianFlowGbps float64 `json:"median_flow_gbps"`
	MaxFlowGbps    float64 `json:"max_flow_gbps"`
	// UtilizationPct is the mean flow goodput over the link rate; the most a link can
	// carry is MaxGoodputGbps (payload over wire bytes of a full packet), so
	// OfMaxGoodputPct is the mean over that.
	UtilizationPct  float64 `json:"utilization_pct"`
	MaxGoodputGbps  float64 `json:"max_goodput_gbps"`
	OfMaxGoodputPct float64 `json:"of_max_goodput_pct"`
	// UplinkTrimPct is TrimmedUplink over DataPackets: the paper's measure of load
	// balance (section 3.2: 0.01% with sender-chosen paths, 2.4% with switch ECMP, in a
	// 128-node FatTree).
	UplinkTrimPct float64 `json:"uplink_trim_pct"`
	// FlowGbps is every flow's window goodput, ascending (Figure 14's curve).
	FlowGbps []float64 `json:"flow_gbps"`
}

// RunPermutation runs a permutation traffic matrix on a FatTree or leaf-spine.
func RunPermutation(cfg PermutationConfig) (PermutationResult, error) {
	if cfg.Size < 1 {
		return PermutationResult{}, fmt.Errorf("sim: permutation needs size >= 1")
	}
	c, err := NewClos(cfg.Clos)
	if err != nil {
		return PermutationResult{}, err
	}
	dst := derangement(len(c.Hosts), cfg.Clos.Seed)
	flows := make([]*Flow, len(c.Hosts))
	for i := range flows {
		flows[i] = &Flow{ID: uint64(i + 1), Src: i, Dst: dst[i], Size: cfg.Size}
	}
	mss := ndp.MaxPayload(c.mtu)
	maxGoodput := c.p.LinkRate * float64(mss) / float64(mss+ndp.HeaderOverhead+EthernetOverhead)
	warmup := cfg.Warmup
	if warmup == 0 {
		warmup = ndp.Time(float64(cfg.Size) * 8 / maxGoodput * 1e9 / 10)
	}
	startBytes := make([]int64, len(flows))
	endBytes := make([]int64, len(flows))
	var windowEnd ndp.Time = -1
	setup := func(w *Workload) {
		c.Sim.At(warmup, func() {
			for i, f := range flows {
				startBytes[i] = f.Received
			}
		})
		w.OnFinish = func(*Flow) {
			if windowEnd >= 0 {
				return
			}
			windowEnd = c.Sim.Now()
			for i, f := range flows {
				endBytes[i] = f.Received
			}
		}
	}
	r, _, err := run(c.Network, flows, cfg.Limit, setup)
	r.Experiment = "permutation"
	pr := PermutationResult{Result: r, MaxGoodputGbps: maxGoodput / 1e9}
	if err != nil {
		return pr, err
	}
	if r.DataPackets > 0 {
		pr.UplinkTrimPct = float64(r.TrimmedUplink) / float64(r.DataPackets) * 100
	}
	if windowEnd < 0 {
		limit := cfg.Limit
		if limit == 0 {
			limit = 10e9
		}
		return pr, fmt.Errorf("sim: no flow finished within the %.1f us limit: no throughput window", float64(limit)/1e3)
	}
	if windowEnd <= warmup {
		return pr, fmt.Errorf("sim: the first flow finished at %.1f us, before the %.1f us warmup: use larger flows or a shorter warmup",
			float64(windowEnd)/1e3, float64(warmup)/1e3)
	}
	pr.WindowStartUs, pr.WindowEndUs = float64(warmup)/1e3, float64(windowEnd)/1e3
	span := float64(windowEnd-warmup) / 1e9
	var sum float64
	for i := range flows {
		g := float64(endBytes[i]-startBytes[i]) * 8 / span / 1e9
		pr.FlowGbps = append(pr.FlowGbps, g)
		sum += g
	}
	sort.Float64s(pr.FlowGbps)
	k := len(pr.FlowGbps)
	pr.MeanFlowGbps = sum / float64(k)
	pr.MinFlowGbps, pr.MaxFlowGbps = pr.FlowGbps[0], pr.FlowGbps[k-1]
	pr.P10FlowGbps, pr.MedianFlowGbps = pr.FlowGbps[k/10], pr.FlowGbps[k/2]
	pr.UtilizationPct = pr.MeanFlowGbps / (c.p.LinkRate / 1e9) * 100
	pr.OfMaxGoodputPct = pr.MeanFlowGbps / pr.MaxGoodputGbps * 100
	return pr, nil
}

// derangement returns a random permutation of [0, n) with no fixed point, drawn with
// seed (random permutations until one has no fixed point: about e tries).
func derangement(n int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 0x9E3779B9))
	for {
		p := rng.Perm(n)
		ok := true
		for i, v := range p {
			if i == v {
				ok = false
				break
			}
		}
		if ok {
			return p
		}
	}
}

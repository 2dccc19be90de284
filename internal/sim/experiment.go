package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/ndpstack/ndpstack/ndp"
)

// IncastConfig is an N-to-1 incast: every sender starts one flow of Size bytes to host 0
// at time zero (NDP paper section 6.1, Figures 9 and 16; Figure 4's 100 × 135 KB).
type IncastConfig struct {
	Star    StarConfig // Hosts is set to Senders+1
	Senders int
	Size    int64
	// Clos, when set, runs the incast on that FatTree or leaf-spine instead of the star
	// (Star is then ignored): host 0 receives and Senders other hosts, drawn at random
	// with the topology's seed, send.
	Clos *ClosConfig
	// Limit stops a run that has not finished by this virtual time. Zero means 10 s.
	Limit ndp.Time
}

// TransferConfig is one flow of Size bytes between two hosts through the switch, over
// links with the Star's Faults.
type TransferConfig struct {
	Star  StarConfig // Hosts is set to 2
	Size  int64
	Limit ndp.Time
}

// Result summarizes a run. Times are microseconds.
type Result struct {
	Experiment  string  `json:"experiment"`
	Topology    string  `json:"topology"`
	Hosts       int     `json:"hosts"`
	Paths       int     `json:"paths"` // UDP source ports each connection sprays over
	Flows       int     `json:"flows"`
	SizeBytes   int64   `json:"size_bytes"`
	LinkGbps    float64 `json:"link_gbps"`
	MTU         int     `json:"mtu"`
	Queue       int     `json:"queue"`
	IW          int     `json:"iw"`
	Completed   int     `json:"completed"`
	Failed      int     `json:"failed"`
	FirstFCTus  float64 `json:"first_fct_us"`
	MedianFCTus float64 `json:"median_fct_us"`
	LastFCTus   float64 `json:"last_fct_us"`
	OptimalUs   float64 `json:"optimal_us"`
	OverheadPct float64 `json:"overhead_pct"`
	GoodputGbps float64 `json:"goodput_gbps"`
	// BytesVerified: every flow delivered all its bytes, in order, and EOF; with
	// Params.CheckBytes each byte was also compared with what was sent.
	BytesVerified bool `json:"bytes_verified"`
	// Switch counters.
	Trimmed     uint64 `json:"trimmed"`
	Bounced     uint64 `json:"bounced"`
	SwitchDrops uint64 `json:"switch_drops"`
	// BouncedPct is the share of trimmed headers returned to sender (paper Figure 4:
	// 25% for 100 × 135 KB in a FatTree).
	BouncedPct float64 `json:"bounced_pct"`
	// TrimmedUplink counts trims at ports toward the core, TrimmedLastHop at ports into
	// a host; the rest happened on the way down (core→aggregation→edge).
	TrimmedUplink  uint64 `json:"trimmed_uplink"`
	TrimmedLastHop uint64 `json:"trimmed_last_hop"`
	// DataPackets counts untrimmed-at-source DATA frames the hosts sent (retransmissions
	// included): the denominator for trim rates.
	DataPackets uint64 `json:"data_packets"`
	// PhantomMarks counts frames the HULL phantom queues marked CE (0 when disabled).
	PhantomMarks uint64 `json:"phantom_marks"`
	// MaxQueue is the deepest data queue any switch port reached, in packets.
	MaxQueue int `json:"max_queue"`
	// Endpoint counters, summed over hosts.
	Nacks       uint64 `json:"nacks"`
	Retransmits uint64 `json:"retransmits"`
	RTOs        uint64 `json:"rtos"`
	// PathsExcluded counts the path scoreboards' exclusions of outlier paths.
	PathsExcluded uint64 `json:"paths_excluded"`
	FrameErrors   uint64 `json:"frame_errors"`
	// Link faults injected.
	Lost       uint64 `json:"lost"`
	Duplicated uint64 `json:"duplicated"`
	Reordered  uint64 `json:"reordered"`
	Corrupted  uint64 `json:"corrupted"`
	Events     uint64 `json:"events"`
	// FCTus is every completed flow's completion time, ascending (what
	// ndpsim --plot draws; not in the JSON, which summarizes it).
	FCTus      []float64 `json:"-"`
	FirstError string    `json:"first_error,omitempty"`
}

// RunIncast runs an incast and reports it against the theoretical optimum.
func RunIncast(cfg IncastConfig) (Result, error) {
	if cfg.Senders < 1 || cfg.Size < 1 {
		return Result{}, fmt.Errorf("sim: incast needs senders >= 1 and size >= 1")
	}
	var n *Network
	senders := make([]int, cfg.Senders)
	if cfg.Clos != nil {
		c, err := NewClos(*cfg.Clos)
		if err != nil {
			return Result{}, err
		}
		if cfg.Senders > len(c.Hosts)-1 {
			return Result{}, fmt.Errorf("sim: incast of %d senders needs more than the %d hosts of the %s",
				cfg.Senders, len(c.Hosts), c.topology)
		}
		// A seeded draw of distinct senders among hosts 1..N-1.
		rng := rand.New(rand.NewPCG(cfg.Clos.Seed, 0x1CA57))
		perm := rng.Perm(len(c.Hosts) - 1)
		for i := range senders {
			senders[i] = perm[i] + 1
		}
		n = c.Network
	} else {
		cfg.Star.Hosts = cfg.Senders + 1
		st, err := NewStar(cfg.Star)
		if err != nil {
			return Result{}, err
		}
		for i := range senders {
			senders[i] = i + 1
		}
		n = st.Network
	}
	flows := make([]*Flow, cfg.Senders)
	for i := range flows {
		flows[i] = &Flow{ID: uint64(i + 1), Src: senders[i], Dst: 0, Size: cfg.Size}
	}
	r, _, err := run(n, flows, cfg.Limit, nil)
	r.Experiment = "incast"
	return r, err
}

// RunTransfer runs one flow between two hosts.
func RunTransfer(cfg TransferConfig) (Result, error) {
	if cfg.Size < 1 {
		return Result{}, fmt.Errorf("sim: transfer needs size >= 1")
	}
	cfg.Star.Hosts = 2
	st, err := NewStar(cfg.Star)
	if err != nil {
		return Result{}, err
	}
	r, _, err := run(st.Network, []*Flow{{ID: 1, Src: 1, Dst: 0, Size: cfg.Size}}, cfg.Limit, nil)
	r.Experiment = "transfer"
	return r, err
}

// run installs the flows on n, runs until they all finish (or limit), and summarizes.
// setup, when set, sees the workload before the simulation starts.
func run(n *Network, flows []*Flow, limit ndp.Time, setup func(*Workload)) (Result, *Workload, error) {
	if limit == 0 {
		limit = 10e9
	}
	w, err := NewWorkload(n, flows)
	if err != nil {
		return Result{}, nil, err
	}
	if setup != nil {
		setup(w)
	}
	done := w.Done
	if report := n.p.Progress; report != nil {
		every := n.p.ProgressEvery
		if every == 0 {
			every = DefaultProgressEvery
		}
		s, next := n.Sim, every
		done = func() bool {
			if s.steps >= next {
				next = s.steps + every
				report(Progress{Now: s.now, Limit: limit, Events: s.steps})
			}
			return w.Done()
		}
	}
	n.Sim.Run(limit, done)
	return summarize(n, w), w, nil
}

// optimal is the paper's theoretical best last-flow completion time: for each receiver,
// its link busy from the first byte to the last with every data packet sent once, plus
// the base one-way delay from its nearest sender; the latest receiver's.
func optimal(n *Network, flows []*Flow) ndp.Time {
	mss := ndp.MaxPayload(n.mtu)
	type sink struct {
		start, first, busy ndp.Time
	}
	sinks := map[int]*sink{}
	for _, f := range flows {
		first := int(min(int64(mss), f.Size)) + ndp.HeaderOverhead
		d := n.OneWay(f.Src, f.Dst, first)
		s := sinks[f.Dst]
		if s == nil {
			s = &sink{start: f.Start, first: d}
			sinks[f.Dst] = s
		}
		s.start, s.first = min(s.start, f.Start), min(s.first, d)
		link := n.DownLink(f.Dst)
		full := f.Size / int64(mss)
		s.busy += ndp.Time(full) * link.SerializationTime(mss+ndp.HeaderOverhead)
		if rest := int(f.Size % int64(mss)); rest > 0 {
			s.busy += link.SerializationTime(rest + ndp.HeaderOverhead)
		}
	}
	var worst ndp.Time
	for _, s := range sinks {
		worst = max(worst, s.start+s.first+s.busy)
	}
	return worst
}

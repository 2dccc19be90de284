package sim

import (
	"fmt"

	"github.com/ndpstack/ndpstack/ndp"
)

// IncastConfig is an N-to-1 incast: every sender starts one flow of Size bytes to host 0
// at time zero (NDP paper section 6.1, Figures 9 and 16; Figure 4's 100 × 135 KB).
type IncastConfig struct {
	Star    StarConfig // Hosts is set to Senders+1
	Senders int
	Size    int64
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
	Experiment    string  `json:"experiment"`
	Flows         int     `json:"flows"`
	SizeBytes     int64   `json:"size_bytes"`
	LinkGbps      float64 `json:"link_gbps"`
	MTU           int     `json:"mtu"`
	Queue         int     `json:"queue"`
	IW            int     `json:"iw"`
	Completed     int     `json:"completed"`
	Failed        int     `json:"failed"`
	FirstFCTus    float64 `json:"first_fct_us"`
	MedianFCTus   float64 `json:"median_fct_us"`
	LastFCTus     float64 `json:"last_fct_us"`
	OptimalUs     float64 `json:"optimal_us"`
	OverheadPct   float64 `json:"overhead_pct"`
	GoodputGbps   float64 `json:"goodput_gbps"`
	BytesVerified bool    `json:"bytes_verified"`
	// Switch counters.
	Trimmed     uint64 `json:"trimmed"`
	Bounced     uint64 `json:"bounced"`
	SwitchDrops uint64 `json:"switch_drops"`
	// PhantomMarks counts frames the HULL phantom queues marked CE (0 when disabled).
	PhantomMarks uint64 `json:"phantom_marks"`
	// MaxQueue is the deepest data queue any switch port reached, in packets.
	MaxQueue int `json:"max_queue"`
	// Endpoint counters, summed over hosts.
	Nacks       uint64 `json:"nacks"`
	Retransmits uint64 `json:"retransmits"`
	RTOs        uint64 `json:"rtos"`
	FrameErrors uint64 `json:"frame_errors"`
	// Link faults injected.
	Lost       uint64 `json:"lost"`
	Duplicated uint64 `json:"duplicated"`
	Reordered  uint64 `json:"reordered"`
	Corrupted  uint64 `json:"corrupted"`
	Events     uint64 `json:"events"`
	FirstError string `json:"first_error,omitempty"`
}

// RunIncast runs an incast and reports it against the theoretical optimum.
func RunIncast(cfg IncastConfig) (Result, error) {
	if cfg.Senders < 1 || cfg.Size < 1 {
		return Result{}, fmt.Errorf("sim: incast needs senders >= 1 and size >= 1")
	}
	cfg.Star.Hosts = cfg.Senders + 1
	st, err := NewStar(cfg.Star)
	if err != nil {
		return Result{}, err
	}
	flows := make([]*Flow, cfg.Senders)
	for i := range flows {
		flows[i] = &Flow{ID: uint64(i + 1), Src: i + 1, Dst: 0, Size: cfg.Size}
	}
	r, err := run(st, flows, cfg.Limit)
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
	r, err := run(st, []*Flow{{ID: 1, Src: 1, Dst: 0, Size: cfg.Size}}, cfg.Limit)
	r.Experiment = "transfer"
	return r, err
}

func run(st *Star, flows []*Flow, limit ndp.Time) (Result, error) {
	if limit == 0 {
		limit = 10e9
	}
	w, err := NewWorkload(st, flows)
	if err != nil {
		return Result{}, err
	}
	st.Sim.Run(limit, w.Done)
	return summarize(st, w), nil
}

// optimal is the paper's theoretical best last-flow completion time for flows all
// sinking into host dst: the receiver's link busy from the first byte to the last with
// every data packet sent once, plus the base one-way delay.
func optimal(st *Star, flows []*Flow, dst int) ndp.Time {
	mss := ndp.MaxPayload(st.mtu)
	link := st.DownLink(dst)
	var busy ndp.Time
	for _, f := range flows {
		full := f.Size / int64(mss)
		busy += ndp.Time(full) * link.SerializationTime(mss+ndp.HeaderOverhead)
		if rest := int(f.Size % int64(mss)); rest > 0 {
			busy += link.SerializationTime(rest + ndp.HeaderOverhead)
		}
	}
	first := mss + ndp.HeaderOverhead
	if int64(mss) > flows[0].Size {
		first = int(flows[0].Size) + ndp.HeaderOverhead
	}
	return st.BaseOneWay(first) + busy
}

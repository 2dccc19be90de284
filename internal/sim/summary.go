package sim

import (
	"sort"
)

func summarize(n *Network, w *Workload) Result {
	r := Result{
		Topology: n.topology,
		Hosts:    len(n.Hosts),
		Flows:    len(w.Flows),
		LinkGbps: n.p.LinkRate / 1e9,
		MTU:      n.mtu,
		Queue:    n.Switches[0].Port(0).Config().DataQueue,
		IW:       n.Hosts[0].EP.Config().IW,
		Paths:    n.Hosts[0].EP.Config().Paths,
		Events:   n.Sim.Steps(),
	}
	if len(w.Flows) > 0 {
		r.SizeBytes = w.Flows[0].Size
	}
	r.BytesVerified = len(w.Flows) > 0
	var fcts []float64
	var total int64
	for _, f := range w.Flows {
		total += f.Received
		if !f.Verified() {
			r.BytesVerified = false
		}
		switch {
		case f.Verified():
			r.Completed++
			fcts = append(fcts, float64(f.FCT())/1e3)
		default:
			r.Failed++
			if r.FirstError == "" {
				switch {
				case f.Err != nil:
					r.FirstError = f.Err.Error()
				case f.Corrupt:
					r.FirstError = "received bytes differ from the bytes sent"
				case !f.Done:
					r.FirstError = "flow did not finish before the time limit"
				}
			}
		}
	}
	if len(fcts) > 0 {
		sort.Float64s(fcts)
		r.FCTus = fcts
		r.FirstFCTus = fcts[0]
		r.MedianFCTus = fcts[len(fcts)/2]
		r.LastFCTus = fcts[len(fcts)-1]
		if r.LastFCTus > 0 {
			r.GoodputGbps = float64(total) * 8 / (r.LastFCTus * 1e3)
		}
	}
	if len(w.Flows) > 0 {
		r.OptimalUs = float64(optimal(n, w.Flows)) / 1e3
		if r.Completed == len(w.Flows) && r.OptimalUs > 0 {
			r.OverheadPct = (r.LastFCTus - r.OptimalUs) / r.OptimalUs * 100
		}
	}
	for _, sw := range n.Switches {
		for i := 0; i < sw.Ports(); i++ {
			ps := sw.Port(i).Stats()
			r.Trimmed += ps.Trimmed
			r.Bounced += ps.Bounced
			r.SwitchDrops += ps.Dropped
			r.PhantomMarks += ps.PhantomMarks
			r.MaxQueue = max(r.MaxQueue, ps.MaxDataDepth)
			switch sw.kinds[i] {
			case portUp:
				r.TrimmedUplink += ps.Trimmed
			case portToHost:
				r.TrimmedLastHop += ps.Trimmed
			}
		}
	}
	if r.Trimmed > 0 {
		r.BouncedPct = float64(r.Bounced) / float64(r.Trimmed) * 100
	}
	for _, h := range n.Hosts {
		es := h.EP.Stats()
		r.Nacks += es.NacksOut
		r.Retransmits += es.Retransmits
		r.RTOs += es.RTOFires
		r.PathsExcluded += es.PathsExcluded
		r.DataPackets += es.DataOut
		r.FrameErrors += h.Stats.FrameErrors
	}
	for _, l := range n.Links {
		ls := l.Stats()
		r.Lost += ls.Lost
		r.Duplicated += ls.Duplicated
		r.Reordered += ls.Reordered
		r.Corrupted += ls.Corrupted
	}
	return r
}

package sim

import (
	"sort"
)

func summarize(st *Star, w *Workload) Result {
	r := Result{
		Flows:    len(w.Flows),
		LinkGbps: st.cfg.LinkRate / 1e9,
		MTU:      st.mtu,
		Queue:    st.Switch.Port(0).Config().DataQueue,
		IW:       st.cfg.Endpoint.IW,
		Events:   st.Sim.Steps(),
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
		r.FirstFCTus = fcts[0]
		r.MedianFCTus = fcts[len(fcts)/2]
		r.LastFCTus = fcts[len(fcts)-1]
		if r.LastFCTus > 0 {
			r.GoodputGbps = float64(total) * 8 / (r.LastFCTus * 1e3)
		}
	}
	if len(w.Flows) > 0 {
		// All experiments here sink into one host; optimal is for that receiver.
		r.OptimalUs = float64(optimal(st, w.Flows, w.Flows[0].Dst)) / 1e3
		if r.Completed == len(w.Flows) && r.OptimalUs > 0 {
			r.OverheadPct = (r.LastFCTus - r.OptimalUs) / r.OptimalUs * 100
		}
	}
	for i := 0; i < st.Switch.Ports(); i++ {
		ps := st.Switch.Port(i).Stats()
		r.Trimmed += ps.Trimmed
		r.Bounced += ps.Bounced
		r.SwitchDrops += ps.Dropped
		r.PhantomMarks += ps.PhantomMarks
		r.MaxQueue = max(r.MaxQueue, ps.MaxDataDepth)
	}
	for i, h := range st.Hosts {
		es := h.EP.Stats()
		r.Nacks += es.NacksOut
		r.Retransmits += es.Retransmits
		r.RTOs += es.RTOFires
		r.FrameErrors += h.Stats.FrameErrors
		for _, l := range []*Link{h.NIC, st.DownLink(i)} {
			ls := l.Stats()
			r.Lost += ls.Lost
			r.Duplicated += ls.Duplicated
			r.Reordered += ls.Reordered
			r.Corrupted += ls.Corrupted
		}
	}
	return r
}

package main

import (
	"fmt"
	"io"

	"github.com/ndpstack/ndpstack/sockapi"
)

// ndpCounters are the counters of one embedded stack (sockapi.Stack.Stats)
// that explain a benchmark's result: whether packets were lost or trimmed
// and resent, whether the pull pacer fell behind, and how many frames each
// transmit syscall carried. Benchmarks report the difference over the
// measured part of a run (sub).
type ndpCounters struct {
	DataOut       uint64 `json:"data_out"`        // DATA frames sent (with retransmissions)
	DataIn        uint64 `json:"data_in"`         // DATA frames received
	PushedOut     uint64 `json:"pushed_out"`      // DATA sent unsolicited (first RTT, after LAST, RTO, probes)
	PulledOut     uint64 `json:"pulled_out"`      // DATA sent in answer to PULLs
	PullsOut      uint64 `json:"pulls_out"`       // PULLs this stack sent as a receiver
	Retransmits   uint64 `json:"retransmits"`     // DATA retransmissions, any cause
	RTOFires      uint64 `json:"rto_fires"`       // packets declared lost by the RTO
	SpuriousRTOs  uint64 `json:"spurious_rtos"`   // of those, packets whose declared-lost copy was ACKed
	RTOBackoffs   uint64 `json:"rto_backoffs"`    // timeout rounds that doubled a connection's RTO
	HostStalls    uint64 `json:"host_stalls"`     // polls that found the stack unpolled for RTO/4 or more (ndp.Stats.HostStalls)
	PathsExcluded uint64 `json:"paths_excluded"`  // path exclusions by the scoreboard
	StallProbes   uint64 `json:"stall_probes"`    // unsolicited probes of a silent peer
	NacksIn       uint64 `json:"nacks_in"`        // NACKs received (sender side)
	NacksOut      uint64 `json:"nacks_out"`       // NACKs sent (receiver side)
	NoBufferNacks uint64 `json:"no_buffer_nacks"` // DATA NACKed because the receive buffer was full
	TrimmedIn     uint64 `json:"trimmed_in"`      // trimmed headers received
	DuplicatesIn  uint64 `json:"duplicates_in"`   // DATA received twice (spurious retransmissions)
	LateSlots     uint64 `json:"pull_late_slots"` // pull slots lost because the pacer was polled late
	Quenched      uint64 `json:"quenched"`        // connections failed by D3 (deadline unmeetable)
	TxFrames      uint64 `json:"link_tx_frames"`
	TxBatches     uint64 `json:"link_tx_batches"`
	TxKicks       uint64 `json:"link_tx_kicks"` // transmit syscalls
	RxFrames      uint64 `json:"link_rx_frames"`
	RxBatches     uint64 `json:"link_rx_batches"`
	RxDropped     uint64 `json:"link_rx_dropped"` // frames the kernel dropped before the stack saw them
	TxRingFull    uint64 `json:"link_tx_ring_full"`
	Wakeups       uint64 `json:"wakeups"` // times a poller slept and woke
}

// stackCounters reads s's counters.
func stackCounters(s *sockapi.Stack) ndpCounters {
	st, err := s.Stats()
	if err != nil { // only stacks attached to ndpd have none; benchmarks here embed theirs
		return ndpCounters{}
	}
	e, l := st.Endpoint, st.Link
	return ndpCounters{
		DataOut: e.DataOut, DataIn: e.DataIn, PushedOut: e.PushedOut, PulledOut: e.PulledOut, PullsOut: e.PullsOut,
		Retransmits: e.Retransmits, RTOFires: e.RTOFires, SpuriousRTOs: e.SpuriousRTOs, RTOBackoffs: e.RTOBackoffs, HostStalls: e.HostStalls,
		PathsExcluded: e.PathsExcluded, StallProbes: e.StallProbes,
		NacksIn: e.NacksIn, NacksOut: e.NacksOut, NoBufferNacks: e.NoBufferNacks, TrimmedIn: e.TrimmedIn,
		DuplicatesIn: e.DuplicatesIn, LateSlots: st.PullQueue.LateSlots, Quenched: st.Quenched,
		TxFrames: l.TxFrames, TxBatches: l.TxBatches, TxKicks: l.TxKicks, RxFrames: l.RxFrames, RxBatches: l.RxBatches,
		RxDropped: l.RxDropped, TxRingFull: l.TxRingFull, Wakeups: st.Wakeups,
	}
}

// sub returns c - before, counter by counter.
func (c ndpCounters) sub(before ndpCounters) ndpCounters {
	return ndpCounters{
		DataOut: c.DataOut - before.DataOut, DataIn: c.DataIn - before.DataIn,
		PushedOut: c.PushedOut - before.PushedOut, PulledOut: c.PulledOut - before.PulledOut,
		PullsOut: c.PullsOut - before.PullsOut, Retransmits: c.Retransmits - before.Retransmits,
		RTOFires: c.RTOFires - before.RTOFires, SpuriousRTOs: c.SpuriousRTOs - before.SpuriousRTOs,
		RTOBackoffs: c.RTOBackoffs - before.RTOBackoffs, HostStalls: c.HostStalls - before.HostStalls, PathsExcluded: c.PathsExcluded - before.PathsExcluded,
		StallProbes: c.StallProbes - before.StallProbes,
		NacksIn:     c.NacksIn - before.NacksIn, NacksOut: c.NacksOut - before.NacksOut,
		NoBufferNacks: c.NoBufferNacks - before.NoBufferNacks, TrimmedIn: c.TrimmedIn - before.TrimmedIn,
		DuplicatesIn: c.DuplicatesIn - before.DuplicatesIn, LateSlots: c.LateSlots - before.LateSlots,
		Quenched: c.Quenched - before.Quenched, TxFrames: c.TxFrames - before.TxFrames,
		TxBatches: c.TxBatches - before.TxBatches, TxKicks: c.TxKicks - before.TxKicks,
		RxFrames: c.RxFrames - before.RxFrames, RxBatches: c.RxBatches - before.RxBatches,
		RxDropped: c.RxDropped - before.RxDropped, TxRingFull: c.TxRingFull - before.TxRingFull,
		Wakeups: c.Wakeups - before.Wakeups,
	}
}

// add returns c + o, counter by counter (sums over several stacks).
func (c ndpCounters) add(o ndpCounters) ndpCounters {
	return ndpCounters{
		DataOut: c.DataOut + o.DataOut, DataIn: c.DataIn + o.DataIn,
		PushedOut: c.PushedOut + o.PushedOut, PulledOut: c.PulledOut + o.PulledOut,
		PullsOut: c.PullsOut + o.PullsOut, Retransmits: c.Retransmits + o.Retransmits,
		RTOFires: c.RTOFires + o.RTOFires, SpuriousRTOs: c.SpuriousRTOs + o.SpuriousRTOs,
		RTOBackoffs: c.RTOBackoffs + o.RTOBackoffs, HostStalls: c.HostStalls + o.HostStalls, PathsExcluded: c.PathsExcluded + o.PathsExcluded,
		StallProbes: c.StallProbes + o.StallProbes,
		NacksIn:     c.NacksIn + o.NacksIn, NacksOut: c.NacksOut + o.NacksOut,
		NoBufferNacks: c.NoBufferNacks + o.NoBufferNacks, TrimmedIn: c.TrimmedIn + o.TrimmedIn,
		DuplicatesIn: c.DuplicatesIn + o.DuplicatesIn, LateSlots: c.LateSlots + o.LateSlots,
		Quenched: c.Quenched + o.Quenched, TxFrames: c.TxFrames + o.TxFrames,
		TxBatches: c.TxBatches + o.TxBatches, TxKicks: c.TxKicks + o.TxKicks,
		RxFrames: c.RxFrames + o.RxFrames, RxBatches: c.RxBatches + o.RxBatches,
		RxDropped: c.RxDropped + o.RxDropped, TxRingFull: c.TxRingFull + o.TxRingFull,
		Wakeups: c.Wakeups + o.Wakeups,
	}
}

// print writes the counters as two indented lines (one when only the
// protocol's are known, as from the simulator).
func (c ndpCounters) print(w io.Writer, label string) {
	perKick := 0.0
	if c.TxKicks > 0 {
		perKick = float64(c.TxFrames) / float64(c.TxKicks)
	}
	fmt.Fprintf(w, "  %s: data out %d (pushed %d, pulled %d), in %d; retransmits %d, RTO fires %d (spurious %d, backoffs %d), paths excluded %d, stall probes %d; NACKs in %d / out %d (no buffer %d); trimmed %d; duplicates %d; quenched %d\n",
		label, c.DataOut, c.PushedOut, c.PulledOut, c.DataIn, c.Retransmits, c.RTOFires, c.SpuriousRTOs, c.RTOBackoffs, c.PathsExcluded, c.StallProbes,
		c.NacksIn, c.NacksOut, c.NoBufferNacks, c.TrimmedIn, c.DuplicatesIn, c.Quenched)
	if c.TxFrames == 0 && c.RxFrames == 0 && c.PullsOut == 0 {
		return // the simulator's summary: no link or pacer counters
	}
	fmt.Fprintf(w, "  %s: link tx %d frames in %d batches, %d kicks (%.1f frames/kick); rx %d frames in %d batches, %d dropped; tx ring full %d; PULLs out %d, late pull slots %d; wakeups %d\n",
		label, c.TxFrames, c.TxBatches, c.TxKicks, perKick, c.RxFrames, c.RxBatches, c.RxDropped, c.TxRingFull, c.PullsOut, c.LateSlots, c.Wakeups)
}

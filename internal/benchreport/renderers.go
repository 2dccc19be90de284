package benchreport

import (
	"bytes"
	"fmt"
)

// renderers are the tables chosen for the outputs of known commands (Kind).
// Each takes the keys it shows or deliberately leaves out; Render passes the
// rest to generic, so a field a benchmark adds later still appears.
var renderers = map[string]func(*bytes.Buffer, *view){
	"ndpperf rpc":        latency,
	"ndpperf pingpong":   latency,
	"ndpperf incast":     incast,
	"ndpperf throughput": throughput,
	"ndpperf priority":   priority,
	"ndpperf demo":       demo,
	"ndpperf ring":       ring,
	"ndpperf xdp-tx":     xdpTx,
	"ndpsim incast":      simResult,
	"ndpsim transfer":    simResult,
	"ndpsim permutation": simResult,
}

var latencyCols = []col{
	{key: "transport", label: "transport"},
	{key: "mode", label: "mode"},
	{key: "p50_us", label: "p50 µs"},
	{key: "p90_us", label: "p90 µs"},
	{key: "p99_us", label: "p99 µs"},
	{key: "p999_us", label: "p99.9 µs"},
	{key: "mean_us", label: "mean µs"},
	{key: "n", label: "RPCs"},
	{key: "lost", label: "lost"},
	{key: "cpu_us_per_exchange", label: "CPU µs per exchange"},
	{key: "cpu_user_us_per_exchange", label: "of it user"},
	{key: "cpu_sys_us_per_exchange", label: "of it system"},
	{key: "turn_cpus", label: "CPUs busy"},
	{key: "in_flight", label: "in flight"},
	{key: "client_share_min", label: "fewest by a client (x even)"},
	{key: "client_share_max", label: "most by a client (x even)"},
}

// latency: ndpperf rpc and pingpong, one row per transport, then the ratios
// measured side by side.
func latency(b *bytes.Buffer, v *view) {
	params(b, v, []col{{key: "size", label: "request and response bytes"}, {key: "conn", label: "connections:"},
		{key: "clients", label: "clients", nonzero: true}, {key: "poll", label: "polling:"}, {key: "rounds", label: "rounds"},
		{key: "cpus", label: "CPUs"}, {key: "idle_cpu_pct", label: "process CPU % with no turn running"}, {key: "setup", label: "setup:"}})
	if r, ok := v.get("results"); ok {
		rowsTable(b, asArray(r), latencyCols)
	}
	if r, ok := v.get("ratios"); ok {
		if o, ok := r.(Object); ok && len(o) > 0 {
			var rows [][]string
			for _, f := range o {
				rows = append(rows, []string{f.Key, cell(f.Value)})
			}
			table(b, []string{"ratio", "value"}, rows)
		}
	}
	var labels []string
	var objs []Object
	for _, side := range []struct{ key, label string }{{"ndp_client_counters", "NDP client"}, {"ndp_server_counters", "NDP server"}} {
		if x, ok := v.get(side.key); ok {
			if o, ok := x.(Object); ok {
				labels, objs = append(labels, side.label), append(objs, o)
			}
		}
	}
	counters(b, "counters (non-zero)", labels, objs)
}

// counters writes one table of the scalar keys of objs with one column per
// object (labels), leaving out the rows that are zero in every column.
func counters(b *bytes.Buffer, heading string, labels []string, objs []Object) {
	if len(objs) == 0 {
		return
	}
	var keys []string
	seen := map[string]bool{}
	for _, o := range objs {
		for _, f := range o {
			if !seen[f.Key] && isScalar(f.Value) {
				seen[f.Key] = true
				keys = append(keys, f.Key)
			}
		}
	}
	var rows [][]string
	for _, k := range keys {
		row, zero := []string{k}, true
		for _, o := range objs {
			x, _ := o.Get(k)
			if !isZero(x) {
				zero = false
			}
			row = append(row, cell(x))
		}
		if !zero {
			rows = append(rows, row)
		}
	}
	if len(rows) > 0 {
		fmt.Fprintf(b, "%s:\n\n", heading)
		table(b, append([]string{"counter"}, labels...), rows)
	}
}

// nested gathers the object under key in each element of arr that has one,
// labelled by the element's labelKey and suffix.
func nested(arr []any, key, labelKey, suffix string) (labels []string, objs []Object) {
	for _, e := range arr {
		o, ok := e.(Object)
		if !ok {
			continue
		}
		if x, ok := o.Get(key); ok {
			if n, ok := x.(Object); ok {
				l, _ := o.Get(labelKey)
				labels, objs = append(labels, cell(l)+suffix), append(objs, n)
			}
		}
	}
	return labels, objs
}

var incastCols = []col{
	{key: "transport", label: "transport"},
	{key: "servers", label: "servers"},
	{key: "size_bytes", label: "bytes per server"},
	{key: "median_ms", label: "median round ms"},
	{key: "p90_ms", label: "p90 ms"},
	{key: "max_ms", label: "max ms"},
	{key: "median_goodput_mbps", label: "goodput Mb/s (median round)"},
	{key: "rounds", label: "rounds"},
}

func incast(b *bytes.Buffer, v *view) {
	params(b, v, []col{{key: "fabric", label: "fabric:"}, {key: "link_bps", label: "switch port b/s"},
		{key: "mtu", label: "MTU"}, {key: "ndp_pull_rate_bps", label: "NDP pull rate b/s"},
		{key: "cpus", label: "CPUs"}, {key: "setup", label: "setup:"}})
	r, ok := v.get("results")
	if !ok {
		return
	}
	res := asArray(r)
	rows := res
	if s, ok := v.get("sim"); ok { // the same incast in the simulator, one more row
		rows = append(append([]any(nil), res...), s)
	}
	rowsTable(b, rows, incastCols, "received_bytes")
	figures(b, v, []col{{key: "optimal_ms", label: "optimum ms (bytes at the pull rate + one round trip)"},
		{key: "rtt_ms", label: "round trip ms (median small NDP call)"},
		{key: "ndp_median_over_optimal", label: "ndp median / optimum"},
		{key: "ndp_over_pull_rate", label: "ndp goodput / pull rate"},
		{key: "ndp_over_tcp", label: "ndp goodput / tcp goodput"}})
	l1, o1 := nested(res, "client_counters", "transport", " client")
	l2, o2 := nested(res, "servers_counters", "transport", " servers")
	l3, o3 := nested(res, "tcp_counters", "transport", " (kernel)")
	counters(b, "stack counters over the measured rounds (non-zero)", append(append(l1, l2...), l3...), append(append(o1, o2...), o3...))
	ls, os := nested(res, "switch", "transport", "")
	counters(b, "switch counters (non-zero)", ls, os)
}

func throughput(b *bytes.Buffer, v *view) {
	params(b, v, []col{{key: "size_bytes", label: "bytes per run"}, {key: "mtu", label: "MTU"},
		{key: "ndp_pull_rate_bps", label: "NDP pull rate b/s"}, {key: "ndp_poll", label: "NDP polling"},
		{key: "cpus", label: "CPUs"}, {key: "setup", label: "setup:"}})
	if r, ok := v.get("summary"); ok {
		rowsTable(b, asArray(r), []col{{key: "transport", label: "transport"}, {key: "median_mbps", label: "median Mb/s"},
			{key: "min_mbps", label: "min Mb/s"}, {key: "max_mbps", label: "max Mb/s"}})
	}
	figures(b, v, []col{{key: "ndp_over_tcp", label: "ndp / tcp (medians)"},
		{key: "ndp_over_pull_rate", label: "ndp median / pull rate"}})
	v.hide("runs") // every run; the summary is their median, min and max
}

func priority(b *bytes.Buffer, v *view) {
	params(b, v, []col{{key: "senders", label: "senders"}, {key: "size_bytes", label: "bytes per flow"},
		{key: "pull_rate_bps", label: "pull rate b/s"}, {key: "rounds", label: "rounds"},
		{key: "fair_share_ms", label: "fair share ms"}, {key: "flow0_deadline_ms", label: "flow 0 deadline ms"}})
	r, ok := v.get("policies")
	if !ok {
		return
	}
	var flows, pols []any
	for _, p := range asArray(r) {
		po, ok := p.(Object)
		if !ok {
			continue
		}
		name, _ := po.Get("policy")
		pol := Object{{"policy", name}}
		for _, f := range po {
			if f.Key == "flows" {
				for _, fl := range asArray(f.Value) {
					if fo, ok := fl.(Object); ok {
						flows = append(flows, append(Object{{"policy", name}}, fo...))
					}
				}
			} else if f.Key != "policy" {
				pol = append(pol, f)
			}
		}
		pols = append(pols, pol)
	}
	rowsTable(b, flows, []col{{key: "policy", label: "policy"}, {key: "flow", label: "flow"}, {key: "hint", label: "hint"},
		{key: "median_ms", label: "median ms"}, {key: "min_ms", label: "min ms"}, {key: "max_ms", label: "max ms"},
		{key: "quenched_rounds", label: "quenched rounds"}})
	rowsTable(b, pols, []col{{key: "policy", label: "policy"}, {key: "median_round_ms", label: "median round ms"},
		{key: "goodput_mbps", label: "goodput Mb/s"}, {key: "flow0_first_rounds", label: "rounds flow 0 finished first"}})
}

func demo(b *bytes.Buffer, v *view) {
	if r, ok := v.get("rpc"); ok {
		if o, ok := r.(Object); ok {
			sub := &view{o: o, used: map[string]bool{}}
			latency(b, sub)
			if rest := sub.unused(); len(rest) > 0 {
				generic(b, rest, 1)
			}
		}
	}
	if r, ok := v.get("incast"); ok {
		rowsTable(b, asArray(r), incastCols, "received_bytes")
	}
}

func ring(b *bytes.Buffer, v *view) {
	params(b, v, []col{{key: "msg_bytes", label: "message bytes"}, {key: "ring_msgs", label: "ring messages"},
		{key: "uds_msgs", label: "UDS messages"}, {key: "latency_samples", label: "latency samples"},
		{key: "gap_ns", label: "gap ns"}, {key: "pinned", label: "pinned"}, {key: "spin_phase_nice", label: "nice"}})
	figures(b, v, []col{
		{key: "ring_msgs_per_s", label: "ring messages/s"},
		{key: "uds_msgs_per_s", label: "Unix socket messages/s"},
		{key: "throughput_ratio_ring_over_uds", label: "throughput ring / UDS"},
		{key: "ring_p10_ns", label: "ring one-way p10 ns"},
		{key: "ring_p50_ns", label: "ring one-way p50 ns"},
		{key: "ring_p99_ns", label: "ring one-way p99 ns"},
		{key: "uds_p50_ns", label: "UDS one-way p50 ns"},
		{key: "uds_p99_ns", label: "UDS one-way p99 ns"},
		{key: "p50_ratio_ring_over_uds", label: "p50 ring / UDS"},
		{key: "ring_wake_p50_ns", label: "ring with eventfd wakeup p50 ns"},
		{key: "ring_wake_p99_ns", label: "ring with eventfd wakeup p99 ns"},
		{key: "wake_p50_ratio_ring_over_uds", label: "wakeup p50 ring / UDS"},
		{key: "ring_wake_eventfd_writes", label: "eventfd writes"},
		{key: "pingpong_same_cpu_rtt_p50_ns", label: "eventfd ping-pong round trip, one CPU, p50 ns"},
		{key: "pingpong_same_cpu_rtt_p99_ns", label: "eventfd ping-pong round trip, one CPU, p99 ns"},
		{key: "pingpong_cross_cpu_rtt_p50_ns", label: "eventfd ping-pong round trip, two CPUs, p50 ns"},
		{key: "pingpong_cross_cpu_rtt_p99_ns", label: "eventfd ping-pong round trip, two CPUs, p99 ns"},
	})
}

func xdpTx(b *bytes.Buffer, v *view) {
	params(b, v, []col{{key: "packet_bytes", label: "IP packet bytes"}, {key: "duration_s", label: "seconds"},
		{key: "batch", label: "batch"}, {key: "mode", label: "mode:"}})
	figures(b, v, []col{
		{key: "sent_fps", label: "sent frames/s"},
		{key: "sent_gbps", label: "sent Gb/s"},
		{key: "received_fps", label: "received frames/s"},
		{key: "received_gbps", label: "received Gb/s"},
		{key: "receiver_kernel_dropped", label: "dropped by the receiving kernel"},
		{key: "tx_kicks", label: "transmit syscalls"},
		{key: "sent_frames", label: "frames sent"},
		{key: "received_frames", label: "frames received"},
	})
}

// simResult: ndpsim incast, transfer and permutation (sim.Result, plus
// sim.PermutationResult's per-flow figures).
func simResult(b *bytes.Buffer, v *view) {
	params(b, v, []col{{key: "experiment", label: "experiment"}, {key: "topology", label: "topology"},
		{key: "hosts", label: "hosts"}, {key: "paths", label: "paths"}, {key: "flows", label: "flows"},
		{key: "size_bytes", label: "bytes per flow"}, {key: "link_gbps", label: "link Gb/s"}, {key: "mtu", label: "MTU"},
		{key: "queue", label: "queue"}, {key: "iw", label: "IW"},
		{key: "window_start_us", label: "window from µs"}, {key: "window_end_us", label: "to µs"}})
	figures(b, v, []col{
		{key: "completed", label: "flows completed"},
		{key: "failed", label: "flows failed", nonzero: true},
		{key: "first_fct_us", label: "first flow done µs"},
		{key: "median_fct_us", label: "median flow done µs"},
		{key: "last_fct_us", label: "last flow done µs"},
		{key: "optimal_us", label: "optimal µs"},
		{key: "overhead_pct", label: "over optimal %"},
		{key: "goodput_gbps", label: "goodput Gb/s"},
		{key: "mean_flow_gbps", label: "flow goodput mean Gb/s"},
		{key: "min_flow_gbps", label: "flow goodput min Gb/s"},
		{key: "p10_flow_gbps", label: "flow goodput p10 Gb/s"},
		{key: "median_flow_gbps", label: "flow goodput median Gb/s"},
		{key: "max_flow_gbps", label: "flow goodput max Gb/s"},
		{key: "utilization_pct", label: "utilization % of link rate"},
		{key: "max_goodput_gbps", label: "most payload a link carries Gb/s"},
		{key: "of_max_goodput_pct", label: "utilization % of that"},
		{key: "bytes_verified", label: "every byte verified"},
		{key: "trimmed", label: "headers trimmed"},
		{key: "trimmed_uplink", label: "trimmed on uplinks", nonzero: true},
		{key: "uplink_trim_pct", label: "uplink trims % of data packets"},
		{key: "trimmed_last_hop", label: "trimmed on last hop", nonzero: true},
		{key: "bounced", label: "returned to sender"},
		{key: "bounced_pct", label: "returned % of trimmed"},
		{key: "switch_drops", label: "switch drops"},
		{key: "max_queue", label: "deepest data queue (packets)"},
		{key: "nacks", label: "NACKs"},
		{key: "retransmits", label: "retransmissions"},
		{key: "rtos", label: "RTOs"},
		{key: "paths_excluded", label: "paths excluded", nonzero: true},
		{key: "frame_errors", label: "bad frames", nonzero: true},
		{key: "phantom_marks", label: "phantom CE marks", nonzero: true},
		{key: "lost", label: "frames lost (injected)", nonzero: true},
		{key: "duplicated", label: "frames duplicated (injected)", nonzero: true},
		{key: "reordered", label: "frames reordered (injected)", nonzero: true},
		{key: "corrupted", label: "frames corrupted (injected)", nonzero: true},
		{key: "first_error", label: "first error", nonzero: true},
	})
	// Per-flow goodputs (drawn by --plot; summarized above), the event count and
	// the trim-rate denominator.
	v.hide("flow_gbps", "events", "data_packets")
}

func asArray(x any) []any {
	a, _ := x.([]any)
	return a
}

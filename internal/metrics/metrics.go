// Package metrics exports a stack's counters as Prometheus metrics
// (github.com/prometheus/client_golang; docs/decisions.md says why).
//
// Nothing here runs on the data path. The collectors hold no metric
// objects that the stack updates: at each scrape, Collect takes one
// snapshot of the counters the stack already keeps (engine.Stack.StatsSnapshot,
// which a Poll batch publishes without the reader taking the stack's lock;
// ndpd's core answers a status request between two batches of its loop)
// and turns it into constant metrics. A scrape costs the stack one copy of
// its counters; between scrapes it costs nothing.
//
// Names start with ndp_ (the stack: endpoint, pull queue, engine, link)
// or ndpd_ (the daemon: buffer pool, core loop, attached applications).
// Per-application series are labelled slot (the application's partition
// of the buffer pool, at most pool partitions values) and comm (its
// process name from /proc/PID/comm, 15 bytes at most), so their number is
// bounded by the partitions times the distinct program names, whatever the
// churn of processes; a slot reused by a new process starts its counters
// from zero, which Prometheus reads as a counter reset.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
)

// metric is one exported value: its description and how to read it from a
// snapshot.
type metric[S any] struct {
	desc *prometheus.Desc
	kind prometheus.ValueType
	val  func(*S) float64
}

func counter[S any](name, help string, labels prometheus.Labels, val func(*S) float64) metric[S] {
	return metric[S]{prometheus.NewDesc(name, help, nil, labels), prometheus.CounterValue, val}
}

func gauge[S any](name, help string, labels prometheus.Labels, val func(*S) float64) metric[S] {
	return metric[S]{prometheus.NewDesc(name, help, nil, labels), prometheus.GaugeValue, val}
}

// dirs is a pair of series of one metric, by direction.
func dirs[S any](name, help string, constLabels prometheus.Labels, in, out func(*S) float64) []metric[S] {
	with := func(d string) prometheus.Labels {
		l := prometheus.Labels{"direction": d}
		for k, v := range constLabels {
			l[k] = v
		}
		return l
	}
	return []metric[S]{
		counter(name, help, with("in"), in),
		counter(name, help, with("out"), out),
	}
}

func u(v uint64) float64 { return float64(v) }

// stackMetrics lists every metric of a stack's counters.
func stackMetrics(cl prometheus.Labels) []metric[engine.Stats] {
	type S = engine.Stats
	with := func(k, v string) prometheus.Labels {
		l := prometheus.Labels{k: v}
		for k, v := range cl {
			l[k] = v
		}
		return l
	}
	var m []metric[S]
	add := func(ms ...metric[S]) { m = append(m, ms...) }
	add(dirs("ndp_frames_total", "NDP frames the endpoint received (in) and built (out).", cl,
		func(s *S) float64 { return u(s.Endpoint.FramesIn) }, func(s *S) float64 { return u(s.Endpoint.FramesOut) })...)
	add(dirs("ndp_data_frames_total", "Untrimmed DATA frames received and sent, retransmissions included.", cl,
		func(s *S) float64 { return u(s.Endpoint.DataIn) }, func(s *S) float64 { return u(s.Endpoint.DataOut) })...)
	add(dirs("ndp_payload_bytes_total", "Payload bytes of DATA frames.", cl,
		func(s *S) float64 { return u(s.Endpoint.BytesIn) }, func(s *S) float64 { return u(s.Endpoint.BytesOut) })...)
	add(dirs("ndp_acks_total", "ACK frames.", cl,
		func(s *S) float64 { return u(s.Endpoint.AcksIn) }, func(s *S) float64 { return u(s.Endpoint.AcksOut) })...)
	add(dirs("ndp_nacks_total", "NACKs (a trimmed header came in: retransmit).", cl,
		func(s *S) float64 { return u(s.Endpoint.NacksIn) }, func(s *S) float64 { return u(s.Endpoint.NacksOut) })...)
	add(dirs("ndp_pulls_total", "PULLs, in their own frames or carried by ACKs.", cl,
		func(s *S) float64 { return u(s.Endpoint.PullsIn) }, func(s *S) float64 { return u(s.Endpoint.PullsOut) })...)
	add(dirs("ndp_resets_total", "RESET frames.", cl,
		func(s *S) float64 { return u(s.Endpoint.ResetsIn) }, func(s *S) float64 { return u(s.Endpoint.ResetsOut) })...)
	add(
		counter("ndp_data_sent_total", "DATA sent, by what sent it: pushed (first RTT, probes, RTO) or pulled (answering a PULL).", with("how", "pushed"),
			func(s *S) float64 { return u(s.Endpoint.PushedOut) }),
		counter("ndp_data_sent_total", "DATA sent, by what sent it: pushed (first RTT, probes, RTO) or pulled (answering a PULL).", with("how", "pulled"),
			func(s *S) float64 { return u(s.Endpoint.PulledOut) }),
		counter("ndp_trimmed_received_total", "Trimmed DATA headers received (a switch cut the payload).", cl,
			func(s *S) float64 { return u(s.Endpoint.TrimmedIn) }),
		counter("ndp_bounced_total", "Own headers a switch returned (return to sender).", cl,
			func(s *S) float64 { return u(s.Endpoint.BouncedIn) }),
		counter("ndp_bounced_resent_total", "Bounced headers resent at once.", cl,
			func(s *S) float64 { return u(s.Endpoint.BouncedResent) }),
		counter("ndp_retransmissions_total", "DATA retransmissions, any cause.", cl,
			func(s *S) float64 { return u(s.Endpoint.Retransmits) }),
		counter("ndp_rto_fires_total", "Packets declared lost by the retransmission timeout.", cl,
			func(s *S) float64 { return u(s.Endpoint.RTOFires) }),
		counter("ndp_spurious_rtos_total", "RTO declarations whose declared-lost copy was acknowledged.", cl,
			func(s *S) float64 { return u(s.Endpoint.SpuriousRTOs) }),
		counter("ndp_rto_backoffs_total", "Timeout rounds that doubled a connection's RTO.", cl,
			func(s *S) float64 { return u(s.Endpoint.RTOBackoffs) }),
		counter("ndp_host_stalls_total", "Times the host did not poll the stack for a quarter RTO or more while a waiter spun; every RTO is then at least twice the longest such stall, halved every second.", cl,
			func(s *S) float64 { return u(s.Endpoint.HostStalls) }),
		counter("ndp_stall_probes_total", "Unsolicited probes after a stall.", cl,
			func(s *S) float64 { return u(s.Endpoint.StallProbes) }),
		counter("ndp_duplicates_received_total", "DATA received again (re-acknowledged).", cl,
			func(s *S) float64 { return u(s.Endpoint.DuplicatesIn) }),
		counter("ndp_no_buffer_nacks_total", "DATA NACKed because the receive buffer was full.", cl,
			func(s *S) float64 { return u(s.Endpoint.NoBufferNacks) }),
		counter("ndp_frames_refused_total", "Frames refused, by reason.", with("reason", "malformed"),
			func(s *S) float64 { return u(s.Endpoint.Malformed) }),
		counter("ndp_frames_refused_total", "Frames refused, by reason.", with("reason", "wrong_port"),
			func(s *S) float64 { return u(s.Endpoint.WrongPort) }),
		counter("ndp_frames_refused_total", "Frames refused, by reason.", with("reason", "unknown_connection"),
			func(s *S) float64 { return u(s.Endpoint.UnknownConn) }),
		counter("ndp_frames_refused_total", "Frames refused, by reason.", with("reason", "time_wait"),
			func(s *S) float64 { return u(s.Endpoint.TimeWaitRejects) }),
		counter("ndp_frames_refused_total", "Frames refused, by reason.", with("reason", "out_of_window"),
			func(s *S) float64 { return u(s.Endpoint.OutOfWindow) }),
		counter("ndp_connections_refused_total", "SYNs refused (no listener, table full).", cl,
			func(s *S) float64 { return u(s.Endpoint.Refused) }),
		counter("ndp_control_drops_total", "Control frames dropped: control queue full.", cl,
			func(s *S) float64 { return u(s.Endpoint.ControlDrops) }),
		counter("ndp_control_merged_total", "ACKs and PULLs merged into an already queued frame.", cl,
			func(s *S) float64 { return u(s.Endpoint.ControlMerged) }),
		counter("ndp_paths_excluded_total", "Path exclusions by the scoreboard.", cl,
			func(s *S) float64 { return u(s.Endpoint.PathsExcluded) }),
		counter("ndp_time_wait_evicted_total", "Time-wait entries evicted early (table full).", cl,
			func(s *S) float64 { return u(s.Endpoint.TimeWaitEvicted) }),
		counter("ndp_connections_opened_total", "Connections opened.", cl,
			func(s *S) float64 { return u(s.Endpoint.ConnsOpened) }),
		counter("ndp_connections_closed_total", "Connections closed.", cl,
			func(s *S) float64 { return u(s.Endpoint.ConnsClosed) }),
		gauge("ndp_connections", "Connections open now.", cl,
			func(s *S) float64 { return float64(s.Endpoint.ConnsActive) }),
		gauge("ndp_time_wait_entries", "Time-wait entries now.", cl,
			func(s *S) float64 { return float64(s.Endpoint.TimeWaitActive) }),
		gauge("ndp_srtt_seconds", "Smoothed RTT over every sample of the endpoint.", cl,
			func(s *S) float64 { return s.Endpoint.SRTT.Seconds() }),

		counter("ndp_pull_queue_pulls_total", "PULLs the pull queue accepted, by what became of them.", with("event", "added"),
			func(s *S) float64 { return u(s.PullQueue.Added) }),
		counter("ndp_pull_queue_pulls_total", "PULLs the pull queue accepted, by what became of them.", with("event", "released"),
			func(s *S) float64 { return u(s.PullQueue.Released) }),
		counter("ndp_pull_queue_pulls_total", "PULLs the pull queue accepted, by what became of them.", with("event", "dropped"),
			func(s *S) float64 { return u(s.PullQueue.Dropped) }),
		counter("ndp_pull_queue_rejected_total", "Pull queue calls ignored (unknown or quenched handle, table full).", cl,
			func(s *S) float64 { return u(s.PullQueue.Rejected) }),
		counter("ndp_pull_queue_late_slots_total", "Pull slots lost because the queue was polled late.", cl,
			func(s *S) float64 { return u(s.PullQueue.LateSlots) }),
		counter("ndp_pull_queue_quenched_total", "Flows the pull queue quenched (D3: deadline unmeetable).", cl,
			func(s *S) float64 { return u(s.PullQueue.Quenched) }),
		gauge("ndp_pull_queue_connections", "Connections the pull queue tracks now.", cl,
			func(s *S) float64 { return float64(s.PullQueue.Conns) }),
		gauge("ndp_pull_queue_pending", "PULLs queued now.", cl,
			func(s *S) float64 { return float64(s.PullQueue.Pending) }),

		counter("ndp_engine_polls_total", "Poll batches run.", cl,
			func(s *S) float64 { return u(s.Polls) }),
		counter("ndp_engine_wakeups_total", "Times the background poller slept and woke.", cl,
			func(s *S) float64 { return u(s.Wakeups) }),
		counter("ndp_engine_quenched_total", "Connections failed because their D3 deadline was unmeetable.", cl,
			func(s *S) float64 { return u(s.Quenched) }),
		counter("ndp_engine_accepts_dropped_total", "Inbound connections refused: no listener or backlog full.", cl,
			func(s *S) float64 { return u(s.AcceptDropped) }),
		counter("ndp_engine_tx_backpressure_total", "Poll batches that found no transmit buffer.", cl,
			func(s *S) float64 { return u(s.TxBackpressure) }),
		counter("ndp_engine_tx_errors_total", "Transmits the link failed.", cl,
			func(s *S) float64 { return u(s.TxErrors) }),
	)
	add(dirs("ndp_link_frames_total", "Frames that crossed the interface queue (received: in, sent: out).", cl,
		func(s *S) float64 { return u(s.Link.RxFrames) }, func(s *S) float64 { return u(s.Link.TxFrames) })...)
	add(dirs("ndp_link_batches_total", "Receive and transmit batches of the interface queue.", cl,
		func(s *S) float64 { return u(s.Link.RxBatches) }, func(s *S) float64 { return u(s.Link.TxBatches) })...)
	add(
		counter("ndp_link_tx_kicks_total", "Transmit syscalls.", cl, func(s *S) float64 { return u(s.Link.TxKicks) }),
		counter("ndp_link_tx_ring_full_total", "Transmits that found the ring full.", cl, func(s *S) float64 { return u(s.Link.TxRingFull) }),
		counter("ndp_link_rx_dropped_total", "Frames the kernel dropped (RX ring full, no buffer, other).", cl, func(s *S) float64 { return u(s.Link.RxDropped) }),
		counter("ndp_link_rx_fill_empty_total", "Times the kernel found no receive buffer posted.", cl, func(s *S) float64 { return u(s.Link.RxFillEmpty) }),
		counter("ndp_link_invalid_descriptors_total", "Descriptors the kernel refused.", cl, func(s *S) float64 { return u(s.Link.InvalidDescriptors) }),
	)
	return m
}

// rttHistogram turns the endpoint's RTT sample counts (ndp.Stats.RTTHist:
// bucket 0 below 1µs, bucket i in [2^(i-1), 2^i) µs, the last open) into a
// Prometheus histogram: upper bounds 1µs, 2µs, 4µs, ... The sum is not
// kept by the endpoint; it is estimated from the bucket midpoints.
func rttHistogram(desc *prometheus.Desc, st *ndp.Stats) prometheus.Metric {
	buckets := make(map[float64]uint64, ndp.RTTHistBuckets-1)
	var cum uint64
	var sum float64
	for i := 0; i < ndp.RTTHistBuckets; i++ {
		n := st.RTTHist[i]
		cum += n
		lo := 0.0
		if i > 0 {
			lo = float64(time.Microsecond) * float64(uint64(1)<<(i-1))
		}
		hi := float64(time.Microsecond) * float64(uint64(1)<<i)
		if i == ndp.RTTHistBuckets-1 {
			sum += float64(n) * lo / 1e9
			break
		}
		sum += float64(n) * (lo + hi) / 2 / 1e9
		buckets[hi/1e9] = cum
	}
	return prometheus.MustNewConstHistogram(desc, cum, sum, buckets)
}

// StackCollector exports an engine stack's counters. It reads them once
// per Collect through read.
type StackCollector struct {
	read    func() (engine.Stats, error)
	metrics []metric[engine.Stats]
	rtt     *prometheus.Desc
}

// NewStackCollector returns a collector over read (usually a Stack's
// StatsSnapshot), with constLabels on every series.
// A read error makes the scrape fail (an invalid metric) rather than
// report zeros.
func NewStackCollector(read func() (engine.Stats, error), constLabels prometheus.Labels) *StackCollector {
	return &StackCollector{
		read:    read,
		metrics: stackMetrics(constLabels),
		rtt:     prometheus.NewDesc("ndp_rtt_seconds", rttHelp, nil, constLabels),
	}
}

// Describe sends every metric's description.
func (c *StackCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.desc
	}
	ch <- c.rtt
}

// Collect reads the counters once and sends them.
func (c *StackCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.read()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.rtt, err)
		return
	}
	collectStack(ch, c.metrics, c.rtt, &st)
}

const rttHelp = "RTT samples (valid Karn samples: ACKs known to answer one particular copy); the sum is estimated from bucket midpoints."

func collectStack(ch chan<- prometheus.Metric, ms []metric[engine.Stats], rtt *prometheus.Desc, st *engine.Stats) {
	for _, m := range ms {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.val(st))
	}
	ch <- rttHistogram(rtt, &st.Endpoint)
}

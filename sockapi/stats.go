package sockapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/internal/metrics"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
)

// Stats are a stack's counters since it was opened: what a benchmark or an
// operator checks first when latency or throughput is off (retransmissions,
// trimmed packets, refused frames, batches per syscall).
type Stats struct {
	// Endpoint is the protocol's counters: frames and bytes, DATA pushed
	// and pulled, ACK/NACK/PULL/RESET, trimmed and bounced packets,
	// retransmissions and their causes, frames refused (malformed, bad
	// checksum, unknown connection, time-wait) and connections.
	Endpoint ndp.Stats
	// PullQueue is the receiver's pull pacer.
	PullQueue pullpacer.QueueStats
	// Link is the interface queue's (AF_XDP socket's) counters; zero for
	// stacks over an in-memory pipe.
	Link LinkStats
	// Messages is what this Stack's message servers (RecvMessage) did:
	// messages handed out, and those reset for one reason or another.
	Messages MessageStats

	Polls         uint64 // engine batches run
	Wakeups       uint64 // times a poller slept and woke
	RxRejected    uint64 // frames the endpoint refused (the reasons are in Endpoint)
	AcceptDropped uint64 // inbound connections refused: no listener, or its backlog was full
	Quenched      uint64 // connections failed because their D3 deadline was unmeetable
	TxErrors      uint64 // transmits the interface failed (a broken link)
}

// LinkStats are an interface queue's counters.
type LinkStats struct {
	RxFrames, RxBatches uint64 // frames received, and the batches they came in
	TxFrames, TxBatches uint64 // frames sent, and the batches they left in
	TxKicks             uint64 // transmit syscalls
	TxRingFull          uint64 // transmits that found the ring full (backpressure)
	RxDropped           uint64 // frames the kernel dropped (RX ring full, no buffer, other)
	RxFillEmpty         uint64 // times the kernel found no receive buffer posted
	InvalidDescriptors  uint64 // descriptors refused (a bug if ever non-zero)
}

// Stats returns the stack's counters. An embedded stack reports its own. A
// stack attached to ndpd reports the daemon's stack, which every
// application attached to that ndpd shares (the same numbers as `ndpd
// status`), or ErrStatsUnavailable if the daemon has none to give.
//
// Stats.Messages are this Stack's own (its listeners' RecvMessage), also
// when the daemon reports no counters (ErrStatsUnavailable).
func (s *Stack) Stats() (Stats, error) {
	st, err := s.b.stats()
	st.Messages = s.msg.snapshot()
	return st, err
}

func statsFromEngine(st engine.Stats) Stats {
	l := st.Link
	return Stats{
		Endpoint:  st.Endpoint,
		PullQueue: st.PullQueue,
		Link: LinkStats{
			RxFrames: l.RxFrames, RxBatches: l.RxBatches, TxFrames: l.TxFrames, TxBatches: l.TxBatches,
			TxKicks: l.TxKicks, TxRingFull: l.TxRingFull, RxDropped: l.RxDropped, RxFillEmpty: l.RxFillEmpty,
			InvalidDescriptors: l.InvalidDescriptors,
		},
		Polls: st.Polls, Wakeups: st.Wakeups, RxRejected: st.RxRejected,
		AcceptDropped: st.AcceptDropped, Quenched: st.Quenched, TxErrors: st.TxErrors,
	}
}

// Collector returns a prometheus.Collector of the stack's counters, for a
// Go service to register in its own registry:
//
//	reg.MustRegister(stack.Collector())
//
// Its series are internal/metrics' ndp_* (frames, DATA, ACK/NACK/PULL,
// retransmissions, RTO fires, trimmed and bounced headers, late pull
// slots, quenched flows, the interface queue's counters, an RTT
// histogram), the same names ndpd serves on --metrics-addr. An embedded
// stack's scrape copies the counters at the end of a Poll batch without
// contending for the stack's lock (engine.Stack.StatsSnapshot); a stack
// attached to ndpd asks the daemon (its shared stack's counters, as
// Stats does). A scrape that cannot read them fails with the error.
//
// It also exports this Stack's message servers' counters (Stats.Messages,
// this process's own also when attached): ndp_messages_received_total,
// ndp_messages_reset_total{reason="too_large|timed_out|failed|refused_peer"}
// and the gauge ndp_messages_pending.
func (s *Stack) Collector() prometheus.Collector {
	return stackCollector{metrics.NewStackCollector(s.b.engineStats, nil), &s.msg}
}

// stackCollector is the engine's collector plus the message counters.
type stackCollector struct {
	engine *metrics.StackCollector
	msg    *messageCounters
}

var (
	msgReceivedDesc = prometheus.NewDesc("ndp_messages_received_total", "Messages RecvMessage handed out.", nil, nil)
	msgResetDesc    = prometheus.NewDesc("ndp_messages_reset_total", "Messages a message server reset, by reason (MessageConfig bounds, or the connection failed).", []string{"reason"}, nil)
	msgPendingDesc  = prometheus.NewDesc("ndp_messages_pending", "Messages read ahead now (partial, or complete and waiting for RecvMessage).", nil, nil)
)

func (c stackCollector) Describe(ch chan<- *prometheus.Desc) {
	c.engine.Describe(ch)
	ch <- msgReceivedDesc
	ch <- msgResetDesc
	ch <- msgPendingDesc
}

func (c stackCollector) Collect(ch chan<- prometheus.Metric) {
	c.engine.Collect(ch)
	m := c.msg.snapshot()
	ch <- prometheus.MustNewConstMetric(msgReceivedDesc, prometheus.CounterValue, float64(m.Received))
	for _, r := range []struct {
		reason string
		n      uint64
	}{{"too_large", m.TooLarge}, {"timed_out", m.TimedOut}, {"failed", m.Failed}, {"refused_peer", m.RefusedPeer}} {
		ch <- prometheus.MustNewConstMetric(msgResetDesc, prometheus.CounterValue, float64(r.n), r.reason)
	}
	ch <- prometheus.MustNewConstMetric(msgPendingDesc, prometheus.GaugeValue, float64(m.Pending))
}

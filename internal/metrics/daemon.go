package metrics

import (
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ndpstack/ndpstack/internal/daemon"
	"github.com/ndpstack/ndpstack/internal/engine"
)

// DaemonCollector exports ndpd: its stack's counters (the same series as
// StackCollector), the buffer pool's occupancy, the core loop's counters
// and every attached application's sockets, bytes and ring occupancy. It
// reads one daemon.Snapshot per Collect (Core.Metrics).
type DaemonCollector struct {
	read  func() (daemon.Snapshot, error)
	stack []metric[engine.Stats]
	rtt   *prometheus.Desc
	core  []metric[daemon.Snapshot]
	up    *prometheus.Desc
	comm  func(pid int32) string

	appSockets, appAccepts, appLent, appBytes, appCommands, appBad, appRings *prometheus.Desc
}

// NewDaemonCollector returns a collector over read (usually
// daemon.Core.Metrics).
func NewDaemonCollector(read func() (daemon.Snapshot, error)) *DaemonCollector {
	type S = daemon.Snapshot
	pool := func(state string, v func(*S) float64) metric[S] {
		return gauge("ndpd_pool_frames", "Frames of the shared buffer pool, by state.", prometheus.Labels{"state": state}, v)
	}
	core := []metric[S]{
		gauge("ndpd_uptime_seconds", "Time since the core loop started.", nil, func(s *S) float64 { return s.Uptime.Seconds() }),
		gauge("ndpd_draining", "1 while the daemon drains (SIGTERM).", nil, func(s *S) float64 {
			if s.Draining {
				return 1
			}
			return 0
		}),
		gauge("ndpd_pool_capacity_frames", "Frames of the shared buffer pool.", nil, func(s *S) float64 { return float64(s.Pool.Frames) }),
		pool("daemon_free", func(s *S) float64 { return float64(s.Pool.DaemonFree) }),
		pool("daemon_held", func(s *S) float64 { return float64(s.Pool.DaemonHeld) }),
		pool("lent", func(s *S) float64 { return float64(s.Pool.Lent) }),
		pool("app_owned", func(s *S) float64 { return float64(s.Pool.AppOwned) }),
		pool("in_flight", func(s *S) float64 { return float64(s.Pool.InFlight) }),
		gauge("ndpd_pool_partitions", "Application partitions of the pool (the most applications attached at once).", nil,
			func(s *S) float64 { return float64(s.Pool.Partitions) }),
		gauge("ndpd_apps_attached", "Applications attached now.", nil, func(s *S) float64 { return float64(len(s.Apps)) }),
		counter("ndpd_pool_rejects_total", "Descriptors the pool refused, by reason.", prometheus.Labels{"reason": "range"}, func(s *S) float64 { return u(s.PoolRejects.Range) }),
		counter("ndpd_pool_rejects_total", "Descriptors the pool refused, by reason.", prometheus.Labels{"reason": "not_owned"}, func(s *S) float64 { return u(s.PoolRejects.NotOwned) }),
		counter("ndpd_pool_rejects_total", "Descriptors the pool refused, by reason.", prometheus.Labels{"reason": "length"}, func(s *S) float64 { return u(s.PoolRejects.Length) }),
		counter("ndpd_pool_rejects_total", "Descriptors the pool refused, by reason.", prometheus.Labels{"reason": "stale"}, func(s *S) float64 { return u(s.PoolRejects.Stale) }),
		counter("ndpd_pool_rejects_total", "Descriptors the pool refused, by reason.", prometheus.Labels{"reason": "double_free"}, func(s *S) float64 { return u(s.PoolRejects.DoubleFree) }),
		counter("ndpd_core_loops_total", "Core loop iterations.", nil, func(s *S) float64 { return u(s.Core.Loops) }),
		counter("ndpd_core_sleeps_total", "Times the core loop slept.", nil, func(s *S) float64 { return u(s.Core.Sleeps) }),
		counter("ndpd_core_rx_pool_empty_total", "RX deliveries deferred: the daemon partition was exhausted.", nil, func(s *S) float64 { return u(s.Core.RXPoolEmpty) }),
		counter("ndpd_core_accepts_unrouted_total", "Inbound connections for a port nobody listens on.", nil, func(s *S) float64 { return u(s.Core.AcceptsUnrouted) }),
		counter("ndpd_apps_attached_total", "Applications attached since start.", nil, func(s *S) float64 { return u(s.Core.AppsAttached) }),
		counter("ndpd_apps_reclaimed_total", "Applications whose resources were reclaimed.", nil, func(s *S) float64 { return u(s.Core.AppsReclaimed) }),
		counter("ndpd_dials_deferred_total", "Dials that waited for a neighbour resolution.", nil, func(s *S) float64 { return u(s.Core.DialsDeferred) }),
		counter("ndpd_dials_unresolved_total", "Deferred dials whose resolution failed.", nil, func(s *S) float64 { return u(s.Core.DialsUnresolved) }),
	}
	app := []string{"slot", "comm"}
	return &DaemonCollector{
		read:  read,
		stack: stackMetrics(nil),
		rtt:   prometheus.NewDesc("ndp_rtt_seconds", rttHelp, nil, nil),
		core:  core,
		up:    prometheus.NewDesc("ndpd_up", "1 when the core answered the scrape.", nil, nil),
		comm:  procComm,

		appSockets:  prometheus.NewDesc("ndpd_app_open_sockets", "An attached application's open sockets.", app, nil),
		appAccepts:  prometheus.NewDesc("ndpd_app_held_accepts", "Accepted connections waiting for a free socket slot of the application.", app, nil),
		appLent:     prometheus.NewDesc("ndpd_app_lent_frames", "Daemon frames the application holds (received data not yet released).", app, nil),
		appBytes:    prometheus.NewDesc("ndpd_app_bytes_total", "Bytes the application sent (tx: handed to the stack) and received (rx: delivered on its rings).", append(app, "direction"), nil),
		appCommands: prometheus.NewDesc("ndpd_app_commands_total", "Commands the application issued.", app, nil),
		appBad:      prometheus.NewDesc("ndpd_app_bad_commands_total", "Commands dropped: unknown opcode, bad slot or argument.", app, nil),
		appRings:    prometheus.NewDesc("ndpd_app_ring_entries", "Descriptors waiting in the application's rings, by ring (per-socket rings summed).", append(app, "ring"), nil),
	}
}

// Describe sends every description.
func (c *DaemonCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.stack {
		ch <- m.desc
	}
	for _, m := range c.core {
		ch <- m.desc
	}
	for _, d := range []*prometheus.Desc{c.rtt, c.up, c.appSockets, c.appAccepts, c.appLent, c.appBytes, c.appCommands, c.appBad, c.appRings} {
		ch <- d
	}
}

// Collect reads one snapshot and sends it. A core that does not answer
// (stopped) yields ndpd_up 0 and nothing else.
func (c *DaemonCollector) Collect(ch chan<- prometheus.Metric) {
	snap, err := c.read()
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, m := range c.core {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.val(&snap))
	}
	if snap.Engine != nil {
		collectStack(ch, c.stack, c.rtt, snap.Engine)
	}
	for _, a := range snap.Apps {
		slot := strconv.Itoa(int(a.App&0xffff) - 1) // ring.AppID: partition index + 1 in the low 16 bits
		comm := c.comm(a.Peer.PID)
		g := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{slot, comm}, extra...)...)
		}
		k := func(d *prometheus.Desc, v uint64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{slot, comm}, extra...)...)
		}
		g(c.appSockets, float64(a.OpenSockets))
		g(c.appAccepts, float64(a.HeldAccepts))
		g(c.appLent, float64(a.Lent))
		k(c.appBytes, a.Counters.TXBytes, "tx")
		k(c.appBytes, a.Counters.RXBytes, "rx")
		k(c.appCommands, a.Counters.Commands)
		k(c.appBad, a.Counters.BadCommands)
		r := a.Rings
		for _, e := range []struct {
			ring string
			n    int
		}{{"cmd", r.Cmd}, {"releases", r.Releases}, {"tx", r.TX}, {"events", r.Events}, {"completions", r.Completions}, {"rx", r.RX}} {
			g(c.appRings, float64(e.n), e.ring)
		}
	}
}

// procComm is a process's name (/proc/PID/comm), "unknown" if unreadable
// (the process exited, or another PID namespace).
func procComm(pid int32) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/comm")
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "unknown"
	}
	return s
}

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
)

// scrape GETs /metrics from addr inside ns (the TCP socket is made on a
// thread in ns; the HTTP exchange then runs over it) and parses the text
// exposition format with the Prometheus parser.
func scrape(t *testing.T, ns *testbed.Namespace, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	var conn net.Conn
	if err := ns.Do(func() (err error) {
		conn, err = net.DialTimeout("tcp", addr, 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET /metrics HTTP/1.1\r\nHost: %s\r\nAccept: text/plain\r\nConnection: close\r\n\r\n", addr)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// value is the sum of a family's series whose labels include want.
func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	mf := mfs[name]
	if mf == nil {
		return -1
	}
	sum := 0.0
next:
	for _, m := range mf.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// TestE2EMetricsMove runs ndpd with --metrics-addr in a testbed, scrapes
// /metrics before and after RPCs through it, and checks that the stack's,
// the pool's and the application's series are there and that the counters
// moved by what the RPCs did. The other daemon runs with --pcap: its
// capture holds the RPCs' frames, received and sent.
func TestE2EMetricsMove(t *testing.T) {
	testbed.RequireRoot(t)
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const addr = "127.0.0.1:9464"
	a := startNdpd(t, p.A, p.Veth.A.Name, "-metrics-addr", addr)
	pcap := filepath.Join(t.TempDir(), "b.pcapng")
	b := startNdpd(t, p.B, p.Veth.B.Name, "-pcap", pcap)
	srv := attachT(t, b.sock)
	cli := attachT(t, a.sock)
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	serveEcho(t, l)
	remote := netip.AddrPortFrom(p.Veth.B.Addr.Addr(), 7)

	before := scrape(t, p.A, addr)
	const rpcs = 50
	for i := 0; i < rpcs; i++ {
		if err := echoCall(cli, remote, payload(2000, byte(i))); err != nil {
			t.Fatalf("rpc %d: %v", i, err)
		}
	}
	after := scrape(t, p.A, addr)

	if v := value(after, "ndpd_up", nil); v != 1 {
		t.Fatalf("ndpd_up %v", v)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64 // at least this much more after the RPCs
	}{
		{"ndp_connections_opened_total", nil, rpcs},
		{"ndp_frames_total", map[string]string{"direction": "out"}, 2 * rpcs},
		{"ndp_frames_total", map[string]string{"direction": "in"}, 2 * rpcs},
		{"ndp_payload_bytes_total", map[string]string{"direction": "out"}, rpcs * 2000},
		{"ndp_link_tx_kicks_total", nil, 1},
		{"ndp_engine_polls_total", nil, 1},
		{"ndp_rtt_seconds", nil, 1},
		{"ndpd_core_loops_total", nil, 1},
		{"ndpd_app_bytes_total", map[string]string{"direction": "tx", "comm": "ndpd.test"}, rpcs * 2000},
		{"ndpd_app_commands_total", map[string]string{"slot": "0"}, rpcs},
	} {
		v0, v1 := value(before, c.name, c.labels), value(after, c.name, c.labels)
		if v0 < 0 || v1-v0 < c.min {
			t.Errorf("%s%v: %v before, %v after the RPCs; want it to grow by at least %v", c.name, c.labels, v0, v1, c.min)
		}
	}
	for _, name := range []string{"ndp_retransmissions_total", "ndp_rto_fires_total", "ndp_trimmed_received_total", "ndp_nacks_total",
		"ndp_bounced_total", "ndp_pulls_total", "ndp_pull_queue_late_slots_total", "ndp_engine_quenched_total",
		"ndpd_pool_frames", "ndpd_app_ring_entries", "ndpd_app_open_sockets", "go_goroutines"} {
		if after[name] == nil {
			t.Errorf("no %s in /metrics", name)
		}
	}
	if v := value(after, "ndpd_pool_frames", nil); v <= 0 {
		t.Errorf("ndpd_pool_frames sums to %v", v)
	}
	if v := value(after, "ndpd_apps_attached", nil); v != 1 {
		t.Errorf("ndpd_apps_attached %v, want 1", v)
	}

	// B captured (--pcap) every frame of the RPCs: stopped, its file holds
	// NDP frames both ways.
	cli.Close()
	srv.Close()
	if err := b.stop(t); err != nil {
		t.Fatalf("ndpd B: %v", err)
	}
	f, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var dirs [2]int
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var fr ndp.Frame
		if err := ndp.ParseFrame(data, &fr); err != nil {
			t.Fatalf("captured frame: %v", err)
		}
		dirs[ci.InterfaceIndex]++
	}
	if dirs[0] < 2*rpcs || dirs[1] < 2*rpcs {
		t.Fatalf("capture holds %d received and %d sent frames, want at least %d each", dirs[0], dirs[1], 2*rpcs)
	}
}

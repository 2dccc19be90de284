package sockapi

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/ndpstack/ndpstack/ndp"
)

// TestCollectorGathers registers an embedded stack's Collector in a test
// registry, runs RPCs, and checks that the registry gathers without error
// (consistent descriptions, no duplicate series) and that the series carry
// the stack's counters.
func TestCollectorGathers(t *testing.T) {
	a, b := pipe(t)
	l, err := b.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	echoServer(l, 0)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(a.Collector())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := bytes.Repeat([]byte{7}, 5000)
	const calls = 4
	for i := 0; i < calls; i++ {
		if _, err := a.Call(ctx, addrB.String()+":7", req); err != nil {
			t.Fatal(err)
		}
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if n < 60 {
		t.Fatalf("%d series, want the stack's ~70", n)
	}
	if n, err := testutil.GatherAndCount(reg, "ndp_frames_total"); err != nil || n != 2 {
		t.Fatalf("ndp_frames_total: %d series, %v; want in and out", n, err)
	}
	want := `
# HELP ndp_connections_opened_total Connections opened.
# TYPE ndp_connections_opened_total counter
ndp_connections_opened_total 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ndp_connections_opened_total"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	st, _ := a.Stats()
	for _, mf := range mfs {
		switch mf.GetName() {
		case "ndp_payload_bytes_total":
			for _, m := range mf.GetMetric() {
				v := m.GetCounter().GetValue()
				if v < calls*float64(len(req)) || v > float64(st.Endpoint.BytesOut+st.Endpoint.BytesIn) {
					t.Errorf("%s %v = %v, want at least %d bytes", mf.GetName(), labels(m), v, calls*len(req))
				}
			}
		case "ndp_rtt_seconds":
			h := mf.GetMetric()[0].GetHistogram()
			// Samples only grow, and Stats was read after Gather. (Their
			// number may be 0: Karn's rule drops the samples of
			// retransmitted packets, and a loaded machine fires 1ms RTOs.)
			if h.GetSampleCount() > st.Endpoint.RTTSamples || len(h.GetBucket()) != ndp.RTTHistBuckets-1 ||
				h.GetBucket()[ndp.RTTHistBuckets-2].GetCumulativeCount() > h.GetSampleCount() {
				t.Errorf("RTT histogram: %d samples (stack %d), %d buckets", h.GetSampleCount(), st.Endpoint.RTTSamples, len(h.GetBucket()))
			}
		}
	}
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

package ndp

import (
	"bytes"
	"testing"
)

// transfer: host 0 dials host 1, both send a message and close; verify content.
func runExchange(t *testing.T, n *testNet, reqLen, respLen int) {
	t.Helper()
	if err := n.hosts[1].ep.Listen(80); err != nil {
		t.Fatal(err)
	}
	c, err := n.hosts[0].ep.Dial(n.addr(1, 80), DialOptions{}, n.now)
	if err != nil {
		t.Fatal(err)
	}
	req, resp := pattern(1, reqLen), pattern(2, respLen)
	n.writeAll(0, c, req, true)
	if !n.run(5_000_000, func() bool { return len(n.hosts[1].accepted) == 1 && n.hosts[1].eof[n.hosts[1].accepted[0]] }) {
		t.Fatalf("server did not get the request: %v", n)
	}
	s := n.hosts[1].accepted[0]
	if got := n.hosts[1].got(s); !bytes.Equal(got, req) {
		t.Fatalf("request corrupted: got %d bytes want %d", len(got), len(req))
	}
	n.writeAll(1, s, resp, true)
	if !n.run(5_000_000, func() bool {
		_, c0 := n.hosts[0].closed[c]
		_, c1 := n.hosts[1].closed[s]
		return c0 && c1
	}) {
		t.Fatalf("not closed: %v", n)
	}
	if got := n.hosts[0].got(c); !bytes.Equal(got, resp) {
		t.Fatalf("response corrupted: got %d bytes want %d", len(got), len(resp))
	}
	if !n.hosts[0].eof[c] {
		t.Fatal("client saw no EOF")
	}
	if e0, e1 := n.hosts[0].closed[c], n.hosts[1].closed[s]; e0 != nil || e1 != nil {
		t.Fatalf("close errors %v %v", e0, e1)
	}
}

func TestExchangeClean(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mtu       int
		req, resp int
	}{
		{"empty", 1500, 0, 0},
		{"tiny", 1500, 10, 20},
		{"100KB", 1500, 100 << 10, 50 << 10},
		{"1MB-jumbo", 9000, 1 << 20, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNet(t, 1, Config{MTU: tc.mtu}, Config{MTU: tc.mtu})
			runExchange(t, n, tc.req, tc.resp)
		})
	}
}

func TestExchangeFaulty(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		loss, dup, trim, bounce float64
		jitterUS                int
		mtu, req, resp          int
	}{
		{"trim30", 0, 0, 0.3, 0, 0, 1500, 300 << 10, 10 << 10},
		{"loss1-dup1-reorder", 0.01, 0.01, 0, 0, 20, 1500, 1 << 20, 64 << 10},
		{"all", 0.01, 0.01, 0.1, 0.2, 20, 1500, 500 << 10, 100 << 10},
		{"all-jumbo", 0.01, 0.01, 0.1, 0.2, 20, 9000, 1 << 20, 100 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				n := newTestNet(t, seed, Config{MTU: tc.mtu}, Config{MTU: tc.mtu})
				n.loss, n.dup, n.trim, n.bounce = tc.loss, tc.dup, tc.trim, tc.bounce
				n.jitter = Time(tc.jitterUS) * 1000
				runExchange(t, n, tc.req, tc.resp)
				t.Logf("seed %d: %v", seed, n)
			}
		})
	}
}

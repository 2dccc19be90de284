package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/afxdp"
	"github.com/ndpstack/ndpstack/internal/testbed"
)

func TestParseRPCFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{nil, true},
		{[]string{"--compare", "xdp,tcp,tcp-newconn,tfo", "--json"}, true},
		{[]string{"--compare", ""}, true},
		{[]string{"--compare", "udp"}, false},
		{[]string{"--mode", "daemon"}, true},
		{[]string{"--mode", "kernel"}, false},
		{[]string{"--poll", "adaptive", "--spin", "50us"}, true},
		{[]string{"--poll", "lazy"}, false},
		{[]string{"--size", "4"}, false},
		{[]string{"--n", "10", "--rounds", "20"}, false},
		{[]string{"--conn", "persistent", "--clients", "8", "--size", "65536"}, true},
		{[]string{"--conn", "persistent", "--poll", "busy", "--compare", "tcp,xdp"}, true},
		{[]string{"--conn", "persistent", "--clients", "8", "--compare", "tcp,xdp"}, true},
		{[]string{"--conn", "persistent", "--compare", "tfo"}, false},
		{[]string{"--conn", "persistent", "--clients", "0"}, false},
		{[]string{"--conn", "persistent", "--mode", "daemon"}, false},
		{[]string{"--clients", "2"}, false},
		{[]string{"--conn", "pooled"}, false},
		{[]string{"--conn", "persistent", "--size", "65536", "--mtu", "9000"}, true},
		{[]string{"--mtu", "1000"}, false},
		{[]string{"--mtu", "9001"}, false},
		{[]string{"--plot", "rpc.png"}, true},
		{[]string{"--plot", "rpc.svg"}, false},
		{[]string{"--mode", "daemon", "--compare", "embedded,tcp", "--cores", "shared"}, true},
		{[]string{"--compare", "embedded"}, false},
		{[]string{"--mode", "daemon", "--cores", "spare"}, false},
		{[]string{"--mode", "daemon", "--cores", "dedicated"}, runtime.NumCPU() >= 4},
	} {
		_, err := parseRPCFlags("rpc", tc.args, 100)
		if (err == nil) != tc.ok {
			t.Errorf("parseRPCFlags(%q) = %v", tc.args, err)
		}
	}
}

// TestRPCTestbed runs every transport of `ndpperf rpc` briefly on a real
// testbed: each must complete its RPCs without loss.
func TestRPCTestbed(t *testing.T) {
	testbed.RequireRoot(t)
	for _, poll := range []string{"busy", "adaptive"} {
		o := rpcOpts{size: 1024, n: 300, warmup: 50, rounds: 2, compare: []string{"xdp", "tcp", "tcp-newconn", "tfo"},
			mode: "embedded", conn: "new", clients: 1, poll: poll, spin: 200e3}
		out, err := rpcTestbed(o)
		if err != nil {
			t.Fatalf("%s: %v", poll, err)
		}
		if len(out.Results) != 5 {
			t.Fatalf("%d results", len(out.Results))
		}
		for _, r := range out.Results {
			if r.N != o.n || r.Lost != 0 || r.P50us <= 0 || r.P50us > r.P99us {
				t.Errorf("%s %s: %+v", poll, r.Transport, r)
			}
			checkCPU(t, r)
		}
		t.Logf("%s: ndp p50 %.1fµs, xdp %.1fµs, tcp-newconn %.1fµs", poll, out.Results[0].P50us, out.Results[1].P50us, out.Results[3].P50us)
		// --plot: every transport's CDF in one figure.
		file := filepath.Join(t.TempDir(), "rpc.png")
		if err := plotLatency(file, "rpc "+poll, out.Results); err != nil {
			t.Fatal(err)
		}
		checkPNG(t, file)
	}
}

// TestRPCPersistentTestbed runs `ndpperf rpc --conn persistent` briefly: one
// pinned client and four concurrent clients, each against kernel TCP with as
// many connections (and the raw AF_XDP floor for as many exchanges, 1 KiB),
// 1 KiB and 64 KiB messages, 64 KiB also at MTU 9000 (ndp's DATA as
// multi-buffer jumbo packets); every exchange completes, every transport's
// CPU per exchange is measured and the stacks' counters come back.
func TestRPCPersistentTestbed(t *testing.T) {
	testbed.RequireRoot(t)
	var dataIn64K uint64 // the 64 KiB case at MTU 1500
	for _, tc := range []struct {
		clients, size, mtu int
		poll               string
	}{{1, 1024, 0, "adaptive"}, {4, 1024, 0, "adaptive"}, {1, 64 << 10, 0, "busy"}, {1, 64 << 10, 9000, "busy"}} {
		o := rpcOpts{size: tc.size, n: 200, warmup: 20, rounds: 2, compare: []string{"tcp"},
			mode: "embedded", conn: "persistent", clients: tc.clients, poll: tc.poll, mtu: tc.mtu}
		if tc.size <= 1472 {
			o.compare = append(o.compare, "xdp")
		}
		if tc.clients > 1 {
			dir := t.TempDir()
			o.prof = profileFlags{mutex: filepath.Join(dir, "mutex.prof"), trace: filepath.Join(dir, "run.trace")}
		}
		out, err := rpcTestbed(o)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		for _, f := range []string{o.prof.mutex, o.prof.trace} {
			if f == "" {
				continue
			}
			if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
				t.Errorf("%+v: profile %s not written (%v)", tc, f, err)
			}
		}
		if len(out.Results) != 1+len(o.compare) || out.NDPClient == nil || out.NDPServer == nil {
			t.Fatalf("%+v: %+v", tc, out)
		}
		// The floor's client sent every request, batched: no more kicks
		// than frames.
		if f := out.XDPFloor; len(o.compare) > 1 && (f == nil || f.ClientTxFrames < uint64(o.n+o.warmup) || f.ClientTxKicks > f.ClientTxFrames) {
			t.Errorf("%+v: xdp floor counters %+v", tc, f)
		}
		for _, r := range out.Results {
			if r.N != o.n || r.Lost != 0 || r.P50us <= 0 || r.P50us > r.P99us {
				t.Errorf("%+v %s: %+v", tc, r.Transport, r)
			}
			checkCPU(t, r)
		}
		// Every response crossed as DATA (warmups and the opening exchange included).
		if want := uint64(o.n + o.warmup); out.NDPClient.DataIn < want {
			t.Errorf("%+v: client received %d DATA frames, want at least %d", tc, out.NDPClient.DataIn, want)
		}
		if out.MTU != mtuOr1500(o.mtu) {
			t.Errorf("%+v: output says MTU %d", tc, out.MTU)
		}
		// At MTU 9000 a 64 KiB message is 8 DATA packets, against 45 at
		// 1500 (the case before): the same exchanges in under a quarter
		// of the packets.
		if tc.size == 64<<10 {
			if tc.mtu == 0 {
				dataIn64K = out.NDPClient.DataIn
			} else if out.NDPClient.DataIn*4 > dataIn64K {
				t.Errorf("%+v: client received %d DATA packets, against %d at MTU 1500: not jumbo", tc, out.NDPClient.DataIn, dataIn64K)
			}
		}
		t.Logf("%+v: ndp p50 %.1fµs p99 %.1fµs, tcp p50 %.1fµs p99 %.1fµs; client RTO fires %d", tc,
			out.Results[0].P50us, out.Results[0].P99us, out.Results[1].P50us, out.Results[1].P99us, out.NDPClient.RTOFires)
	}
}

// checkCPU asserts r's CPU figures are plausible: some CPU per exchange,
// user and system adding up to it, and no more CPUs busy than the machine
// has.
func checkCPU(t *testing.T, r latencyResult) {
	t.Helper()
	if r.CPUUsPerExchange <= 0 || r.CPUUserUsPerExchange < 0 || r.CPUSysUsPerExchange < 0 ||
		math.Abs(r.CPUUserUsPerExchange+r.CPUSysUsPerExchange-r.CPUUsPerExchange) > 0.02 ||
		r.TurnCPUs <= 0 || r.TurnCPUs > float64(runtime.NumCPU())+0.1 || r.InFlight <= 0 {
		t.Errorf("%s: CPU figures %.2f µs per exchange (%.2f user, %.2f system), %.2f CPUs busy",
			r.Transport, r.CPUUsPerExchange, r.CPUUserUsPerExchange, r.CPUSysUsPerExchange, r.TurnCPUs)
	}
}

// TestXDPFloor runs the raw AF_XDP floor for 4 concurrent exchanges: every
// slot is answered, the measured exchanges are exactly --n, each a plausible
// round trip, none lost, and its CPU per exchange is measured.
func TestXDPFloor(t *testing.T) {
	testbed.RequireRoot(t)
	tb, pair, err := newPair()
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	const slots, n, warmup, rounds = 4, 2000, 200, 4
	f, err := newXDPFloor(pair, 1024, slots)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	res, err := measurePingpong([]ppEnd{f}, pingpongOpts{size: 1024, n: n, warmup: warmup, rounds: rounds, timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.N != n || r.Lost != 0 || r.P50us <= 0 || r.P50us > r.P99us || r.P999us > 1e6 {
		t.Errorf("floor: %+v", r)
	}
	checkCPU(t, r)
	// The slots' exchanges overlap; in flight is estimated from the
	// measured exchanges' mean (the warmup's are not kept): near the
	// slots, not above them by much.
	if r.InFlight <= 1 || r.InFlight > 1.5*slots {
		t.Errorf("%.2f exchanges in flight, at most %d", r.InFlight, slots)
	}
	// Every slot took its share of every turn's exchanges: warmup, the
	// 200 unmeasured at each later turn, and the measured ones.
	total := 0
	for s, a := range f.answered {
		if a < (n+warmup)/slots/2 {
			t.Errorf("slot %d answered %d times", s, a)
		}
		total += a
	}
	if want := n + warmup + 200*(rounds-1); total != want {
		t.Errorf("%d answers, want %d", total, want)
	}
	// No frame leaked on either side (the last kicks' completions reaped).
	for _, p := range []*afxdp.Port{f.pa, f.pb} {
		p.Queues()[0].Complete()
		if err := p.UMEM().Accounting().Check(); err != nil {
			t.Errorf("frames: %v", err)
		}
	}
	t.Logf("floor, %d slots: p50 %.1f µs, p99 %.1f µs, %.1f µs CPU per exchange (%.1f user, %.1f system), %.2f CPUs, %.2f in flight",
		slots, r.P50us, r.P99us, r.CPUUsPerExchange, r.CPUUserUsPerExchange, r.CPUSysUsPerExchange, r.TurnCPUs, r.InFlight)
}

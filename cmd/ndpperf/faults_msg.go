package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
)

// Message-server rows of the fault matrix: hostile or broken clients of a
// server that answers one message per connection. NDP's server is a
// sockapi RecvMessage loop (examples/echo-server's); kernel TCP's is the
// usual Go server, a goroutine per connection reading the message to EOF
// under a read deadline and a size limit, resetting (SO_LINGER 0) what
// fails. Both echo what they read.
//
//   - stalled sender: a client writes 100 bytes of a message and keeps the
//     connection open while another client makes 1 KiB Calls; blocks of
//     Calls with and without the stalled sender alternate in one run, and
//     the row compares their p50s.
//   - oversized message: 2 MiB to a server whose limit is 1 MiB: the
//     client's error, then 10 Calls that must be answered.
//   - timed-out message: a client stalls mid-message past the server's
//     1 s read timeout: it must be reset within the bound, then 10 Calls.
//   - 1000 stalled conns (NDP): on a three-host bridge, one peer opens
//     1,000 message connections that stall after 100 bytes while another
//     makes 100 Calls; the row reports the heap growth, the messages held
//     at most (the per-peer bound), and how and when the stalled ones were
//     reset.

func init() { registerFaultScenarios(messageScenarios) }

const (
	msgLimit       = 1 << 20
	msgReadTimeout = time.Second
)

func messageScenarios(o faultOpts) []faultScenario {
	both := []string{"ndp", "tcp"}
	return []faultScenario{
		{name: "stalled sender", transports: both, run: (*faultEnv).stalledSender,
			what: "a sender stalled mid-message beside 1 KiB Calls from another connection: every Call answered, p50 within 1.5x of the blocks without it"},
		{name: "oversized message", transports: both, run: (*faultEnv).oversizedMessage,
			what: "a 2 MiB message to a server with a 1 MiB limit: its client gets a clear error, the server answers the next Calls"},
		{name: "timed-out message", transports: both, run: (*faultEnv).timedOutMessage,
			what: fmt.Sprintf("a message stalled past the server's %v read timeout: reset within the bound, the server answers the next Calls", msgReadTimeout)},
		{name: "1000 stalled conns", transports: []string{"ndp"}, run: (*faultEnv).stalledFlood,
			what: "1,000 stalled message connections from one peer: server memory bounded, another peer's Calls answered, the stalled ones reset at the bound"},
	}
}

// msgService is an echo message server on B and its clients on A.
type msgService struct {
	call func(ctx context.Context, req []byte) ([]byte, error)
	// stall opens a connection, writes 100 bytes of a message and leaves
	// it open.
	stall func(ctx context.Context) (net.Conn, error)
	stats func() sockapi.MessageStats // NDP only
	close func()
}

// openMsgService starts transport t's message server with the given read
// timeout (its size limit is msgLimit).
func (e *faultEnv) openMsgService(t string, readTimeout time.Duration) (*msgService, error) {
	switch t {
	case "ndp":
		cs, ss, err := e.openNDP(sockapi.Config{})
		if err != nil {
			return nil, err
		}
		l, err := ss.Listen(7)
		if err == nil {
			err = l.SetMessageConfig(sockapi.MessageConfig{ReadTimeout: readTimeout})
		}
		if err != nil {
			cs.Close()
			ss.Close()
			return nil, err
		}
		go echoMessages(l)
		addr := e.pair.Veth.B.Addr.Addr().String() + ":7"
		return &msgService{
			call: func(ctx context.Context, req []byte) ([]byte, error) { return cs.Call(ctx, addr, req) },
			stall: func(ctx context.Context) (net.Conn, error) {
				c, err := cs.Dial(ctx, addr)
				if err != nil {
					return nil, err
				}
				if _, err := c.Write(make([]byte, 100)); err != nil {
					c.Close()
					return nil, err
				}
				return c, nil
			},
			stats: func() sockapi.MessageStats { st, _ := ss.Stats(); return st.Messages },
			close: func() { l.Close(); cs.Close(); ss.Close() },
		}, nil
	case "tcp":
		addr := e.pair.Veth.B.Addr.Addr().String() + ":9917"
		var ln net.Listener
		if err := e.pair.B.Do(func() (err error) {
			ln, err = net.Listen("tcp4", addr)
			return err
		}); err != nil {
			return nil, err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go tcpServeMessage(c.(*net.TCPConn), readTimeout)
			}
		}()
		dial := func(ctx context.Context) (c net.Conn, err error) {
			err = e.pair.A.Do(func() (err error) {
				var d net.Dialer
				c, err = d.DialContext(ctx, "tcp4", addr)
				return err
			})
			return c, err
		}
		return &msgService{
			call: func(ctx context.Context, req []byte) ([]byte, error) {
				c, err := dial(ctx)
				if err != nil {
					return nil, err
				}
				defer c.Close()
				if d, ok := ctx.Deadline(); ok {
					c.SetDeadline(d)
				}
				if _, err := c.Write(req); err != nil {
					return nil, err
				}
				c.(*net.TCPConn).CloseWrite()
				return io.ReadAll(c)
			},
			stall: func(ctx context.Context) (net.Conn, error) {
				c, err := dial(ctx)
				if err == nil {
					_, err = c.Write(make([]byte, 100))
				}
				return c, err
			},
			close: func() { ln.Close() },
		}, nil
	}
	return nil, fmt.Errorf("unknown transport %q", t)
}

// tcpServeMessage reads one message (to EOF, within readTimeout and
// msgLimit) and echoes it; a failed message is reset.
func tcpServeMessage(c *net.TCPConn, readTimeout time.Duration) {
	c.SetReadDeadline(time.Now().Add(readTimeout))
	data, err := io.ReadAll(io.LimitReader(c, msgLimit+1))
	if err != nil || len(data) > msgLimit {
		c.SetLinger(0) // RST
		c.Close()
		return
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(data)
	c.Close()
}

// callBatch makes n sequential 1 KiB Calls and returns their latencies
// and the number that failed.
func callBatch(svc *msgService, n int) (lat []time.Duration, failed int, lastErr error) {
	req := make([]byte, 1024)
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		resp, err := svc.call(ctx, req)
		d := time.Since(start)
		cancel()
		if err == nil && len(resp) != len(req) {
			err = fmt.Errorf("response of %d bytes", len(resp))
		}
		if err != nil {
			failed++
			lastErr = err
			continue
		}
		lat = append(lat, d)
	}
	return lat, failed, lastErr
}

func durPercentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

func (e *faultEnv) stalledSender(t string) faultRow {
	const rounds, perBlock = 5, 100
	row := faultRow{}
	svc, err := e.openMsgService(t, time.Minute) // the stalled sender stays for the whole block
	if err != nil {
		row.Outcome = "setup: " + err.Error()
		return row
	}
	defer svc.close()
	callBatch(svc, 50) // warm up
	var without, with []time.Duration
	var lastErr error
	for r := 0; r < rounds; r++ {
		lat, failed, err := callBatch(svc, perBlock)
		without = append(without, lat...)
		row.Requests += perBlock
		row.Lost += failed
		lastErr = cmpOr(err, lastErr)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		stalled, err := svc.stall(ctx)
		cancel()
		if err != nil {
			row.Outcome = "stalled sender: " + err.Error()
			return row
		}
		lat, failed, err = callBatch(svc, perBlock)
		stalled.Close()
		with = append(with, lat...)
		row.Requests += perBlock
		row.Lost += failed
		lastErr = cmpOr(err, lastErr)
	}
	p50a, p50b := durPercentile(without, 0.5), durPercentile(with, 0.5)
	ratio := float64(p50b) / float64(max(p50a, 1))
	row.Metrics = map[string]float64{
		"p50_us_without": us(p50a), "p50_us_with_stalled": us(p50b), "p50_ratio": ratio,
		"p99_us_without": us(durPercentile(without, 0.99)), "p99_us_with_stalled": us(durPercentile(with, 0.99)),
	}
	if lastErr != nil {
		row.ClientErr = lastErr.Error()
	}
	row.Pass = row.Lost == 0 && ratio <= 1.5
	row.Outcome = fmt.Sprintf("%d/%d Calls answered", row.Requests-row.Lost, row.Requests)
	row.Detail = fmt.Sprintf("p50 %.0f us with the stalled sender, %.0f us without (ratio %.2f)", us(p50b), us(p50a), ratio)
	if svc.stats != nil {
		row.Detail += fmt.Sprintf("; server messages %+v", svc.stats())
	}
	return row
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// afterFault makes 10 Calls and records them in row: the server must go on.
func afterFault(svc *msgService, row *faultRow) bool {
	_, failed, err := callBatch(svc, 10)
	row.Requests += 10
	row.Lost += failed
	if err != nil {
		row.ServerErr = "a Call after the fault: " + err.Error()
	}
	return failed == 0
}

func (e *faultEnv) oversizedMessage(t string) faultRow {
	row := faultRow{}
	svc, err := e.openMsgService(t, 10*time.Second)
	if err != nil {
		row.Outcome = "setup: " + err.Error()
		return row
	}
	defer svc.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	start := time.Now()
	_, cerr := svc.call(ctx, make([]byte, 2<<20))
	cancel()
	row.TotalS = time.Since(start).Seconds()
	clear := false
	switch {
	case cerr == nil:
		row.ClientErr = "none: the oversized message was answered"
	case t == "ndp":
		row.ClientErr = cerr.Error()
		clear = errors.Is(cerr, sockapi.ErrMessageTooLarge)
	default:
		row.ClientErr = cerr.Error() // kernel TCP: a reset, nothing says why
		clear = true
	}
	row.ClientErrAfterS = row.TotalS
	served := afterFault(svc, &row)
	row.Pass = clear && served
	row.Outcome = fmt.Sprintf("client error after %.3f s; then %d/%d Calls answered", row.TotalS, row.Requests-row.Lost, row.Requests)
	row.Detail = row.Outcome
	if svc.stats != nil {
		row.Detail += fmt.Sprintf("; server messages %+v", svc.stats())
	}
	return row
}

func (e *faultEnv) timedOutMessage(t string) faultRow {
	row := faultRow{BoundS: msgReadTimeout.Seconds()}
	svc, err := e.openMsgService(t, msgReadTimeout)
	if err != nil {
		row.Outcome = "setup: " + err.Error()
		return row
	}
	defer svc.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	c, err := svc.stall(ctx)
	if err != nil {
		row.Outcome = "stalled sender: " + err.Error()
		return row
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, rerr := c.Read(make([]byte, 16))
	after := time.Since(start)
	row.ClientErrAfterS = after.Seconds()
	reset := rerr != nil && !errors.Is(rerr, os.ErrDeadlineExceeded) && rerr != io.EOF
	if rerr != nil {
		row.ClientErr = rerr.Error()
	}
	served := afterFault(svc, &row)
	inBound := after <= msgReadTimeout+500*time.Millisecond
	row.Pass = reset && inBound && served
	row.Outcome = fmt.Sprintf("stalled message reset %.3f s after its first bytes (bound %v); then %d/%d Calls answered",
		after.Seconds(), msgReadTimeout, row.Requests-row.Lost, row.Requests)
	row.Detail = row.Outcome
	if svc.stats != nil {
		row.Detail += fmt.Sprintf("; server messages %+v", svc.stats())
	}
	return row
}

// stalledFlood runs on a testbed of its own: three hosts on a bridge. The
// server and the good peer are stacks in this process; the flooding peer is
// a child process (`ndpperf stall-peer`), so the heap growth measured here
// is the server's (and the idle good peer's), not the flooder's 1,000
// connections.
func (e *faultEnv) stalledFlood(t string) faultRow {
	const n, goodCalls = 1000, 100
	row := faultRow{BoundS: msgReadTimeout.Seconds()}
	fail := func(err error) faultRow { row.Outcome = "setup: " + err.Error(); return row }
	tb, err := newTestbed()
	if err != nil {
		return fail(err)
	}
	defer tb.Close()
	br, err := tb.NewNamespace()
	if err != nil {
		return fail(err)
	}
	if err := br.NewBridge("br0"); err != nil {
		return fail(err)
	}
	var hosts [3]struct { // server, good peer, flooding peer
		ns   *testbed.Namespace
		link testbed.Link
	}
	for i := range hosts {
		ns, err := tb.NewNamespace()
		if err != nil {
			return fail(err)
		}
		v, err := tb.NewVeth(ns, br, testbed.VethConfig{AddrA: fmt.Sprintf("10.206.0.%d/24", i+1)})
		if err != nil {
			return fail(err)
		}
		if _, err := br.Run("link", "set", v.B.Name, "master", "br0"); err != nil {
			return fail(err)
		}
		hosts[i].ns, hosts[i].link = ns, v.A
	}
	var stacks [2]*sockapi.Stack // server, good peer
	defer func() {
		for _, s := range stacks {
			if s != nil {
				s.Close()
			}
		}
	}()
	for i := range stacks {
		var err error
		if stacks[i], err = openStack(hosts[i].ns, hosts[i].link.Name, sockapi.Config{}); err != nil {
			return fail(err)
		}
	}
	srv, good := stacks[0], stacks[1]
	l, err := srv.Listen(7)
	if err != nil {
		return fail(err)
	}
	defer l.Close()
	if err := l.SetMessageConfig(sockapi.MessageConfig{ReadTimeout: msgReadTimeout}); err != nil {
		return fail(err)
	}
	go echoMessages(l)
	addr := "10.206.0.1:7"
	svc := &msgService{call: func(ctx context.Context, req []byte) ([]byte, error) { return good.Call(ctx, addr, req) }}
	callBatch(svc, 20) // warm up: neighbour entries, buffers
	var before, during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()

	self, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	child := hosts[2].ns.Command(self, "stall-peer", "-iface", hosts[2].link.Name, "-addr", addr, "-n", strconv.Itoa(n))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	if err := child.Start(); err != nil {
		return fail(err)
	}
	defer child.Process.Kill()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "flooded" {
		child.Wait()
		return fail(fmt.Errorf("stall-peer: %q", lines.Text()))
	}
	// The flood is in: n connections with 100 bytes each, held open.
	var maxPending uint64
	lat, failed, cerr := callBatch(svc, goodCalls)
	row.Requests, row.Lost = goodCalls, failed
	if cerr != nil {
		row.ClientErr = "good peer: " + cerr.Error()
	}
	runtime.GC()
	runtime.ReadMemStats(&during)
	heapKiB := (int64(during.HeapInuse) - int64(before.HeapInuse)) >> 10
	extraG := runtime.NumGoroutine() - goroutines
	st, _ := srv.Stats()
	maxPending = st.Messages.Pending

	var res stallPeerResult
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &res) != nil {
		child.Wait()
		return fail(fmt.Errorf("stall-peer result: %q", lines.Text()))
	}
	child.Wait()
	st, _ = srv.Stats()
	m := st.Messages
	row.TotalS = res.LastResetS
	row.Metrics = map[string]float64{
		"stalled_conns": float64(res.Conns), "heap_growth_kib": float64(heapKiB), "goroutines_added": float64(extraG),
		"pending_during_flood": float64(maxPending), "refused_per_peer": float64(m.RefusedPeer), "timed_out": float64(m.TimedOut),
		"refused_by_backlog": float64(res.Refused), "good_p50_us": us(durPercentile(lat, 0.5)), "flood_s": res.FloodS,
		"last_reset_after_flood_s": res.LastResetS - res.FloodS,
	}
	if res.Err != "" {
		row.ServerErr = "stalled conns: " + res.Err
	}
	inBound := res.LastResetS-res.FloodS <= msgReadTimeout.Seconds()+1
	row.Pass = res.Err == "" && res.Conns == n && failed == 0 && res.Reset+res.Refused == res.Conns && maxPending <= 32 && inBound
	row.Outcome = fmt.Sprintf("%d/%d stalled conns reset, at most %d held; other peer %d/%d Calls answered", res.Reset+res.Refused, res.Conns, maxPending, goodCalls-failed, goodCalls)
	row.Detail = fmt.Sprintf("%d stalled conns from one peer: %d held during the flood, %d reset on arrival (per-peer bound), %d at the %v read timeout, %d refused by the backlog; last reset %.2f s after the flood; server heap +%d KiB, +%d goroutines; other peer %d/%d Calls answered, p50 %.0f us",
		res.Conns, maxPending, m.RefusedPeer, m.TimedOut, msgReadTimeout, res.Refused, res.LastResetS-res.FloodS, heapKiB, extraG, goodCalls-failed, goodCalls, us(durPercentile(lat, 0.5)))
	return row
}

// stallPeerResult is what `ndpperf stall-peer` prints last (JSON).
type stallPeerResult struct {
	Conns      int     `json:"conns"`        // stalled connections opened
	Reset      int     `json:"reset"`        // ended by a reset
	Refused    int     `json:"refused"`      // refused (the server's backlog overflowed)
	FloodS     float64 `json:"flood_s"`      // time to open them all
	LastResetS float64 `json:"last_reset_s"` // from the first open to the last reset seen
	Err        string  `json:"error,omitempty"`
}

func init() {
	register(&subcommand{
		name:    "stall-peer",
		summary: "(run by faults) open n message connections that stall after 100 bytes, report how they end",
		run:     runStallPeer,
	})
}

// runStallPeer opens -n connections to -addr from a stack on -iface, writes
// 100 bytes on each and keeps them open; prints "flooded", then waits for
// each to end and prints a stallPeerResult.
func runStallPeer(args []string) error {
	fs := flag.NewFlagSet("stall-peer", flag.ContinueOnError)
	iface := fs.String("iface", "", "interface")
	addr := fs.String("addr", "", "server ip:port")
	n := fs.Int("n", 1000, "connections")
	wait := fs.Duration("wait", 20*time.Second, "how long each connection may wait for its reset")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := sockapi.Open(sockapi.Config{Interface: *iface})
	if err != nil {
		return err
	}
	defer s.Close()
	var res stallPeerResult
	start := time.Now()
	conns := make([]*sockapi.Conn, 0, *n)
	for i := 0; i < *n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := s.Dial(ctx, *addr)
		cancel()
		if err == nil {
			_, err = c.Write(make([]byte, 100))
		}
		if err != nil {
			res.Err = fmt.Sprintf("conn %d: %v", i, err)
			break
		}
		conns = append(conns, c)
	}
	res.Conns = len(conns)
	res.FloodS = time.Since(start).Seconds()
	fmt.Println("flooded")
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(*wait))
		_, err := c.Read(make([]byte, 16))
		switch {
		case errors.Is(err, sockapi.ErrConnReset):
			res.Reset++
		case errors.Is(err, sockapi.ErrConnRefused):
			res.Refused++
		case res.Err == "":
			res.Err = fmt.Sprintf("read: %v, want a reset", err)
		}
		res.LastResetS = max(res.LastResetS, time.Since(start).Seconds())
		c.Close()
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	return nil
}

// echoMessages answers every message on l (up to msgLimit bytes) with its
// bytes until RecvMessage fails.
func echoMessages(l *sockapi.Listener) {
	for {
		m, err := l.RecvMessage(msgLimit)
		if err != nil {
			return
		}
		m.Reply(m.Data)
	}
}

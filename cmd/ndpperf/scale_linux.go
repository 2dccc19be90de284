package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/daemon"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
)

// scale: how ndpd's throughput of RPCs grows with its queues. For each
// queue count N (--queues), two ndpd processes (one per namespace of a veth
// pair with as many queues as the largest N) serve queues 0..N-1, one core
// loop each, queue i's loop pinned to CPU i (mod the CPU count) in A and
// N+i in B; N client applications attached to A (each to every queue, dials
// spread over the queues: veth's placement) make new-connection RPCs
// (CallInto) as fast as they can against one echo application attached to
// B, which serves them from N goroutines. The figure is the aggregate RPCs/s
// of the clients over --duration after a warm-up, the median of --rounds
// turns (the queue counts take turns, so load on a shared machine hits them
// alike), with each queue's share of A's received frames.

// scaleWarmLimit bounds how long after --warmup a round waits for every
// client's first completed RPC.
const scaleWarmLimit = 10 * time.Second

func init() {
	register(&subcommand{
		name:    "scale",
		summary: "ndpd multi-queue scaling: aggregate RPCs/s of N client apps over N queues, N = --queues (root)",
		run:     runScale,
	})
}

type scaleOpts struct {
	queues   []int
	size     int
	duration time.Duration
	warmup   time.Duration
	rounds   int
	json     bool
}

type scaleRow struct {
	Queues   int       `json:"queues"`
	Clients  int       `json:"clients"`
	RPCsPerS float64   `json:"rpcs_per_s"` // median over rounds
	Rounds   []float64 `json:"rounds_rpcs_per_s"`
	QueueRx  []uint64  `json:"queue_rx_frames"` // A's received frames per queue, last round
	OverOne  float64   `json:"over_one_queue,omitempty"`
}

type scaleOutput struct {
	Size     int        `json:"size_bytes"`
	Duration float64    `json:"duration_s"`
	CPUs     int        `json:"cpus"`
	Rows     []scaleRow `json:"rows"`
	Setup    string     `json:"setup"`
}

func runScale(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	queues := fs.String("queues", "1,2,4", "comma-separated queue counts N (N clients over N queues each)")
	size := fs.Int("size", 1024, "request and response bytes")
	duration := fs.Duration("duration", 2*time.Second, "measured time per queue count and round")
	warmup := fs.Duration("warmup", 300*time.Millisecond, "unmeasured time first (and until every client has completed an RPC)")
	rounds := fs.Int("rounds", 3, "turns per queue count")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o := scaleOpts{size: *size, duration: *duration, warmup: *warmup, rounds: *rounds, json: *asJSON}
	for _, f := range strings.Split(*queues, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 16 {
			return fmt.Errorf("--queues %q: want counts in 1..16", *queues)
		}
		o.queues = append(o.queues, n)
	}
	switch {
	case o.size < 1 || o.size > 1<<20:
		return fmt.Errorf("--size %d: want 1..1MiB", o.size)
	case o.duration <= 0 || o.warmup < 0 || o.rounds < 1 || o.rounds > 50:
		return errors.New("--duration > 0, --warmup >= 0, --rounds 1..50")
	case os.Geteuid() != 0:
		return errors.New("scale needs root (namespaces, AF_XDP)")
	}
	out, err := scaleTestbed(o)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(out)
	}
	fmt.Printf("ndpd scaling (%s)\n", out.Setup)
	fmt.Printf("%6s %7s %12s %10s  %s\n", "queues", "clients", "RPCs/s", "x 1 queue", "A's rx frames per queue")
	for _, r := range out.Rows {
		fmt.Printf("%6d %7d %12.0f %10.2f  %v\n", r.Queues, r.Clients, r.RPCsPerS, r.OverOne, r.QueueRx)
	}
	return nil
}

func scaleTestbed(o scaleOpts) (scaleOutput, error) {
	ncpu := runtime.NumCPU()
	out := scaleOutput{Size: o.size, Duration: o.duration.Seconds(), CPUs: ncpu,
		Setup: fmt.Sprintf("%d CPUs; two ndpd processes on a veth pair, N queues each (queue i's core loop on CPU i mod %d in A, N+i in B, adaptive); N client apps (sockapi.Attach defaults) make new-connection %d-byte RPCs against one echo app; median of %d rounds of %v", ncpu, ncpu, o.size, o.rounds, o.duration)}
	tb, err := newTestbed()
	if err != nil {
		return out, err
	}
	defer tb.Close()
	pair, err := tb.NewPair(testbed.VethConfig{AddrA: "10.206.0.1/24", AddrB: "10.206.0.2/24", Queues: slices.Max(o.queues)})
	if err != nil {
		return out, err
	}
	rows := make([]scaleRow, len(o.queues))
	for round := 0; round < o.rounds; round++ {
		for i, n := range o.queues {
			rate, rx, err := scaleRun(pair, n, o)
			if err != nil {
				return out, fmt.Errorf("%d queues: %w", n, err)
			}
			rows[i].Queues, rows[i].Clients = n, n
			rows[i].Rounds = append(rows[i].Rounds, rate)
			rows[i].QueueRx = rx
		}
	}
	var one float64
	for i := range rows {
		v := slices.Clone(rows[i].Rounds)
		sort.Float64s(v)
		rows[i].RPCsPerS = v[len(v)/2]
		if rows[i].Queues == 1 {
			one = rows[i].RPCsPerS
		}
	}
	for i := range rows {
		if one > 0 {
			rows[i].OverOne = rows[i].RPCsPerS / one
		}
	}
	out.Rows = rows
	return out, nil
}

// scaleRun runs one queue count: daemons up, apps attached, warm-up, the
// measured interval; it returns the clients' aggregate RPCs/s and A's
// received frames per queue over the run.
func scaleRun(pair *testbed.Pair, n int, o scaleOpts) (float64, []uint64, error) {
	ncpu := runtime.NumCPU()
	var ca, cb []string
	for i := range n {
		ca = append(ca, strconv.Itoa(i%ncpu))
		cb = append(cb, strconv.Itoa((n+i)%ncpu))
	}
	d, err := startNdpdPair(pair, ndpdPairOpts{cpus: [2]string{strings.Join(ca, ","), strings.Join(cb, ",")}, spin: "0", queues: n})
	if err != nil {
		return 0, nil, err
	}
	defer d.close()
	srv, err := sockapi.Attach(d.socks[1])
	if err != nil {
		return 0, nil, err
	}
	defer srv.Close()
	l, err := srv.Listen(rpcNDPPort)
	if err != nil {
		return 0, nil, err
	}
	var wg sync.WaitGroup
	var srvErr atomic.Value
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, o.size)
			for {
				c, err := l.AcceptNDP()
				if err != nil {
					return // the listener closed
				}
				if _, err := io.ReadFull(c, buf); err == nil {
					_, err = c.WriteAndClose(buf)
				}
				if err != nil {
					srvErr.CompareAndSwap(nil, err)
				}
				c.Close()
			}
		}()
	}
	defer func() {
		l.Close()
		wg.Wait()
	}()
	clients := make([]*sockapi.Stack, 0, n)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range n {
		c, err := sockapi.Attach(d.socks[0])
		if err != nil {
			return 0, nil, err
		}
		clients = append(clients, c)
	}
	before, err := daemon.QueryStatus(d.socks[0])
	if err != nil {
		return 0, nil, err
	}
	addr := sockapi.Addr{IP: pair.Veth.B.Addr.Addr(), Port: rpcNDPPort}
	var measuring, stop atomic.Bool
	var done, warm atomic.Int64
	errs := make(chan error, n)
	var cwg sync.WaitGroup
	for _, c := range clients {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			req, resp := make([]byte, o.size), make([]byte, o.size)
			for first := true; !stop.Load(); first = false {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				m, err := c.CallInto(ctx, addr, req, resp)
				cancel()
				if err == nil && m != len(resp) {
					err = fmt.Errorf("short response: %d of %d bytes", m, len(resp))
				}
				if err != nil {
					errs <- err
					return
				}
				if first {
					warm.Add(1)
				}
				if measuring.Load() {
					done.Add(1)
				}
			}
		}()
	}
	time.Sleep(o.warmup)
	// The measurement starts once every client has completed an RPC (its
	// first attach and dial through ndpd can outlast a short warm-up on a
	// loaded machine), at most scaleWarmLimit later.
	for deadline := time.Now().Add(scaleWarmLimit); warm.Load() < int64(n) && len(errs) == 0; {
		if time.Now().After(deadline) {
			stop.Store(true)
			cwg.Wait()
			return 0, nil, fmt.Errorf("%d of %d clients completed no RPC within %v of the warm-up", int64(n)-warm.Load(), n, scaleWarmLimit)
		}
		time.Sleep(time.Millisecond)
	}
	measuring.Store(true)
	t0 := time.Now()
	time.Sleep(o.duration)
	measuring.Store(false)
	elapsed := time.Since(t0)
	stop.Store(true)
	cwg.Wait()
	select {
	case err := <-errs:
		return 0, nil, fmt.Errorf("client: %w", err)
	default:
	}
	if err, _ := srvErr.Load().(error); err != nil {
		return 0, nil, fmt.Errorf("echo: %w", err)
	}
	after, err := daemon.QueryStatus(d.socks[0])
	if err != nil {
		return 0, nil, err
	}
	rx := make([]uint64, n)
	qs, qb := after.Queues, before.Queues
	if n == 1 {
		qs, qb = []daemon.Snapshot{after}, []daemon.Snapshot{before}
	}
	for i := range qs {
		if qs[i].Engine != nil && qb[i].Engine != nil {
			rx[i] = qs[i].Engine.RxFrames - qb[i].Engine.RxFrames
		}
	}
	return float64(done.Load()) / elapsed.Seconds(), rx, nil
}

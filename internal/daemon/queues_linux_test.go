package daemon

import (
	"bytes"
	"errors"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// faultyTransport is a loopTransport whose Poll fails on demand, the way a
// core loop dies or hangs: a panic, a goroutine exit, or a block.
type faultyTransport struct {
	*loopTransport
	fault   atomic.Int32 // faultNone...
	release chan struct{}
}

const (
	faultNone int32 = iota
	faultPanic
	faultExit
	faultStuck
)

func (t *faultyTransport) Poll(deferTx, spun bool) bool {
	switch t.fault.Load() {
	case faultPanic:
		t.fault.Store(faultNone)
		panic("injected fault")
	case faultExit:
		t.fault.Store(faultNone)
		runtime.Goexit()
	case faultStuck:
		<-t.release
	}
	return t.loopTransport.Poll(deferTx, spun)
}

// queuesHarness is a daemon of two queues: a Core over its own transport
// each (a loopTransport connects a queue's dials to its own listeners),
// one Server, RunCores supervising.
type queuesHarness struct {
	cores []*Core
	trs   []*faultyTransport
	srv   *Server
	path  string
	run   chan error
}

func startQueues(t *testing.T, n int, stall time.Duration) *queuesHarness {
	t.Helper()
	h := &queuesHarness{path: filepath.Join(t.TempDir(), "ndpd.sock"), run: make(chan error, 1)}
	for q := range n {
		tr := &faultyTransport{loopTransport: newLoopTransport(64 << 10), release: make(chan struct{})}
		cfg := smallConfig()
		cfg.Queue = q
		cfg.DrainTimeout = 100 * time.Millisecond
		core, err := NewCore(cfg, tr)
		if err != nil {
			t.Fatal(err)
		}
		h.cores, h.trs = append(h.cores, core), append(h.trs, tr)
	}
	srv, err := Listen(ServerConfig{Path: h.path}, h.cores...)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	go srv.Serve()
	go func() { h.run <- RunCores(h.cores, RunConfig{StallTimeout: stall}) }()
	t.Cleanup(func() {
		for _, tr := range h.trs {
			close(tr.release) // a stuck loop ends (and sees Stop)
		}
		for _, c := range h.cores {
			c.Stop()
		}
		srv.Close()
	})
	return h
}

// rpcOnEachQueue makes one echo RPC through every queue: clients[q] dials
// queue q's transport, where server[q] listens.
func rpcOnEachQueue(t *testing.T, clients []*Client) {
	t.Helper()
	for q, c := range clients {
		got := call(t, c, 7, payload(5000, byte(q)))
		if len(got) != 5000 {
			t.Fatalf("queue %d: echo of %d bytes", q, len(got))
		}
	}
}

func TestRunCoresServesEveryQueue(t *testing.T) {
	h := startQueues(t, 2, 0)
	srv, err := AttachQueues(h.path, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range srv {
			c.Close()
		}
	}()
	cli, err := AttachQueues(h.path, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cli {
			c.Close()
		}
	}()
	if len(cli) != 2 || cli[1].Queues() != 2 {
		t.Fatalf("attached to %d queues", len(cli))
	}
	for _, c := range srv {
		l, err := c.Listen(7)
		if err != nil {
			t.Fatal(err)
		}
		go echoServer(t, l)
	}
	rpcOnEachQueue(t, cli)
	snap, err := QueryStatus(h.path)
	if err != nil || len(snap.Queues) != 2 {
		t.Fatalf("status: %v, %d queues", err, len(snap.Queues))
	}
	for q, s := range snap.Queues {
		if s.Queue != q || len(s.Apps) != 2 || s.Apps[0].Counters.TXBytes+s.Apps[1].Counters.TXBytes == 0 {
			t.Fatalf("queue %d snapshot: queue %d, apps %+v", q, s.Queue, s.Apps)
		}
	}
	if _, err := AttachQueue(h.path, 2, ClientConfig{}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("attach to queue index 2 of 2: %v", err)
	}
	for _, c := range h.cores {
		c.Drain()
	}
	select {
	case err := <-h.run:
		if err != nil {
			t.Fatalf("RunCores after drain: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("RunCores did not return after every core drained")
	}
}

// TestQueueFailureSharesFate: when one queue's core loop panics, exits or
// gets stuck, RunCores reports that queue's failure, every other loop stops,
// and once the server closes, the applications blocked on every queue get
// ErrDaemonGone (queues share fate: no application is left with a silent
// hole where one queue's peers used to be).
func TestQueueFailureSharesFate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault int32
		want  string
	}{
		{"panic", faultPanic, "panicked"},
		{"exit", faultExit, "exited"},
		{"stuck", faultStuck, "stalled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startQueues(t, 2, 200*time.Millisecond)
			srv, err := AttachQueues(h.path, ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			cli, err := AttachQueues(h.path, ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, c := range append(srv, cli...) {
					c.Close()
				}
			})
			var ls []*ClientListener
			for _, c := range srv {
				l, err := c.Listen(7)
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, l)
			}
			// One open connection per queue, a Read blocked on each.
			errs := make(chan error, 4)
			for _, c := range cli {
				s, err := c.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Write([]byte("hello"), time.Now().Add(10*time.Second), nil); err != nil {
					t.Fatal(err)
				}
				go func() { _, err := s.Read(make([]byte, 16), time.Time{}, nil); errs <- err }()
			}
			for _, l := range ls {
				if _, err := l.Accept(time.Now().Add(10*time.Second), nil); err != nil {
					t.Fatal(err)
				}
				go func() { _, err := l.Accept(time.Time{}, nil); errs <- err }()
			}

			h.trs[1].fault.Store(tc.fault)
			h.cores[1].wake()
			var runErr error
			select {
			case runErr = <-h.run:
			case <-time.After(20 * time.Second):
				t.Fatal("RunCores did not report the failed queue")
			}
			var qe *QueueError
			if !errors.As(runErr, &qe) || qe.Queue != 1 || !errors.Is(runErr, ErrQueueFailed) || !strings.Contains(runErr.Error(), tc.want) {
				t.Fatalf("RunCores: %v, want queue 1 %s", runErr, tc.want)
			}
			h.srv.Close() // what ndpd does next, before it exits
			for range 4 {
				select {
				case err := <-errs:
					if !errors.Is(err, ErrDaemonGone) {
						t.Fatalf("blocked call returned %v, want ErrDaemonGone", err)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("a blocked call still hangs after a queue failed")
				}
			}
			if _, err := cli[0].Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{}); !errors.Is(err, ErrDaemonGone) {
				t.Fatalf("dial on the healthy queue after the failure: %v", err)
			}
		})
	}
}

// TestRSSPlacementServed: a daemon placing dials by the NIC's RSS tells
// attaching applications so, and AttachQueues fetches the key, table and
// served queues they compute the queue with.
func TestRSSPlacementServed(t *testing.T) {
	var cores []*Core
	for q := range 2 {
		cfg := smallConfig()
		cfg.Queue = q
		core, err := NewCore(cfg, newLoopTransport(64<<10))
		if err != nil {
			t.Fatal(err)
		}
		cores = append(cores, core)
	}
	rss := &RSS{Key: bytes.Repeat([]byte{0x6d, 0x5a}, 20), Indir: []uint32{4, 7, 7, 4}, Served: []int{4, 7}}
	path := filepath.Join(t.TempDir(), "ndpd.sock")
	srv, err := Listen(ServerConfig{Path: path, Placement: PlaceRSS, RSS: rss}, cores...)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	run := make(chan error, 1)
	go func() { run <- RunCores(cores, RunConfig{}) }()
	defer func() {
		for _, c := range cores {
			c.Stop()
		}
		<-run
		srv.Close()
	}()
	cs, err := AttachQueues(path, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	got := cs[0].RSS()
	if cs[0].Placement() != PlaceRSS || got == nil || !bytes.Equal(got.Key, rss.Key) || !slices.Equal(got.Indir, rss.Indir) || !slices.Equal(got.Served, rss.Served) {
		t.Fatalf("placement %v, RSS %+v", cs[0].Placement(), got)
	}
	peer, local := netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("10.0.0.1")
	i, ok := got.Index(peer, local)
	if want := rss.Indir[rss.Hash(peer, local)%4]; !ok || rss.Served[i] != int(want) {
		t.Fatalf("Index %d %v, want the attach index of NIC queue %d", i, ok, want)
	}
}

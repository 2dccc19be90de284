package main

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/daemon"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
)

// attachQueuesT attaches to every queue of the ndpd at sock.
func attachQueuesT(t *testing.T, sock string) []*daemon.Client {
	t.Helper()
	cs, err := daemon.AttachQueues(sock, daemon.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

// TestE2ETwoQueues: two ndpd processes serving queues 0 and 1 of a veth
// pair with two queues each; an echo server and a client attached to every
// queue exchange RPCs through both queues (a connection stays on the queue
// its frames arrive on: veth delivers a frame on the peer's queue numbered
// as the one it left on). Each queue's core loop and engine counted its own
// share of the traffic, the pools settle, and an application attached
// through sockapi (which places its dials itself) completes RPCs too.
func TestE2ETwoQueues(t *testing.T) {
	testbed.RequireRoot(t)
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	a := startNdpd(t, p.A, p.Veth.A.Name, "-queues", "0,1")
	b := startNdpd(t, p.B, p.Veth.B.Name, "-queues", "0,1")
	remote := netip.AddrPortFrom(p.Veth.B.Addr.Addr(), 7)

	srv := attachQueuesT(t, b.sock)
	cli := attachQueuesT(t, a.sock)
	if len(srv) != 2 || len(cli) != 2 || cli[0].Queues() != 2 || cli[0].Placement() != daemon.PlaceSpread {
		t.Fatalf("attached to %d and %d queues (daemon says %d, placement %v)", len(srv), len(cli), cli[0].Queues(), cli[0].Placement())
	}
	for _, c := range srv {
		l, err := c.Listen(7)
		if err != nil {
			t.Fatal(err)
		}
		serveEcho(t, l)
	}
	const rpcs = 8
	for q, c := range cli {
		for i := range rpcs {
			if err := echoCall(c, remote, payload(3000+i*500, byte(q))); err != nil {
				t.Fatalf("queue %d RPC %d: %v", q, i, err)
			}
		}
	}
	for _, d := range []*ndpdProc{a, b} {
		snap, err := daemon.QueryStatus(d.sock)
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Queues) != 2 {
			t.Fatalf("status of %s: %d queue snapshots, want 2", d.sock, len(snap.Queues))
		}
		for i, q := range snap.Queues {
			if q.Queue != i || q.Engine == nil {
				t.Fatalf("queue snapshot %d: queue %d, engine %v", i, q.Queue, q.Engine)
			}
			e := q.Engine
			// Each RPC is a connection: at least its data and the answer's
			// PULLs or ACKs both ways.
			if e.RxFrames < rpcs*2 || e.TxFrames < rpcs*2 || e.Link.RxFrames != e.RxFrames {
				t.Errorf("%s queue %d carried too little: rx %d tx %d (link rx %d)", d.sock, q.Queue, e.RxFrames, e.TxFrames, e.Link.RxFrames)
			}
			if len(q.Apps) != 1 || q.Apps[0].Counters.TXBytes == 0 || q.Apps[0].Counters.RXBytes == 0 {
				t.Errorf("%s queue %d apps %+v", d.sock, q.Queue, q.Apps)
			}
		}
	}

	// sockapi attaches to every queue and places dials by the daemon's
	// placement (spread on veth): its RPCs use both queues too.
	st, err := sockapi.Attach(a.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	before, _ := daemon.QueryStatus(a.sock)
	for i := range rpcs {
		msg := payload(1000+i, 9)
		resp := make([]byte, len(msg)+1)
		n, err := st.CallInto(context.Background(), sockapi.Addr{IP: remote.Addr(), Port: remote.Port()}, msg, resp)
		if err != nil || n != len(msg) {
			t.Fatalf("sockapi RPC %d: %d bytes, %v", i, n, err)
		}
	}
	after, _ := daemon.QueryStatus(a.sock)
	for i := range after.Queues {
		if after.Queues[i].Engine.TxFrames <= before.Queues[i].Engine.TxFrames {
			t.Errorf("sockapi RPCs did not use queue %d", i)
		}
	}
	st.Close()
	for _, c := range cli {
		c.Close()
	}
	poolsSettled(t, a.sock, 0)
}

// poolsSettled is poolSettled for every queue of a multi-queue ndpd.
func poolsSettled(t *testing.T, sock string, apps int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		snap, err := daemon.QueryStatus(sock)
		if err == nil {
			last = ""
			for _, q := range snap.Queues {
				p := q.Pool
				if !(p.Lent == 0 && p.InFlight == 0 && p.DaemonHeld == 0 && p.DaemonFree == p.DaemonFrames &&
					p.AppsAttached == apps && q.PoolAudit == "") {
					last = fmt.Sprintf("queue %d: %+v audit %q", q.Queue, p, q.PoolAudit)
				}
			}
			if last == "" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pools of %s not settled: %s", sock, last)
}

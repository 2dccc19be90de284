package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
)

// engineHarness runs one core over an engine.Stack on one end of an
// in-memory cable.
func engineHarness(t *testing.T, l engine.Link, ip [4]byte, seed uint64, res engine.Resolver) *harness {
	t.Helper()
	tr := NewEngineTransport(EngineTransportConfig{})
	st, err := engine.New(engine.Config{
		Link:         l,
		Endpoint:     ndp.Config{LocalIP: ip, Seed: seed},
		Resolver:     res,
		NoBackground: true,
		OnEvent:      tr.OnEvent,
	})
	if err != nil {
		t.Fatal(err)
	}
	tr.Bind(st, -1)
	h := startHarnessOn(t, smallConfig(), ServerConfig{}, tr)
	t.Cleanup(func() {
		h.stop()
		st.Close()
	})
	return h
}

// TestTwoDaemonsOverEngine: two ndpd cores, each owning an engine.Stack,
// joined by an in-memory cable; a server app on one and a client app on
// the other exchange echo RPCs of many sizes through the rings and the
// real NDP endpoint.
func TestTwoDaemonsOverEngine(t *testing.T) {
	ipA, ipB := [4]byte{10, 9, 0, 1}, [4]byte{10, 9, 0, 2}
	macA, macB := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	la, lb := engine.NewMemPipe(engine.MemConfig{}, macA, macB)
	res := engine.StaticResolver{ipA: macA, ipB: macB}
	ha := engineHarness(t, la, ipA, 1, res)
	hb := engineHarness(t, lb, ipB, 2, res)
	srvApp := hb.attach()
	cliApp := ha.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go echoServer(t, l)
	remote := netip.AddrPortFrom(netip.AddrFrom4(ipB), 7)
	for i, n := range []int{1, 100, 1400, 1500, 5000, 64 << 10, 500 << 10} {
		msg := payload(n, byte(i))
		s, err := cliApp.Dial(remote, DialOptions{Size: int64(n)})
		if err != nil {
			t.Fatal(err)
		}
		dl := time.Now().Add(20 * time.Second)
		if _, err := s.Write(msg, dl, nil); err != nil {
			t.Fatalf("size %d write: %v", n, err)
		}
		s.CloseWrite()
		got, err := readAll(s, dl)
		s.Close()
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("size %d: %v, %d/%d bytes", n, err, len(got), n)
		}
	}
	for i := 0; i < 100; i++ {
		msg := payload(64, byte(i))
		s, _ := cliApp.Dial(remote, DialOptions{})
		dl := time.Now().Add(20 * time.Second)
		s.Write(msg, dl, nil)
		s.CloseWrite()
		got, err := readAll(s, dl)
		s.Close()
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("rpc %d: %v, %q", i, err, got)
		}
	}
	for _, h := range []*harness{ha, hb} {
		poolSettled(t, h.path, 1)
	}
}

// gateResolver answers from a static table after the address's gate opens;
// an address without a table entry fails when its gate opens. Resolve waits
// for the gate or ctx, like a kernel ARP that nobody answers.
type gateResolver struct {
	macs    engine.StaticResolver
	gates   map[[4]byte]chan struct{} // nil entry: answer at once
	waiting chan [4]byte              // an address whose gate Resolve waits on
}

func (r *gateResolver) Resolve(ctx context.Context, ip [4]byte) ([6]byte, error) {
	if g := r.gates[ip]; g != nil {
		r.waiting <- ip
		select {
		case <-g:
		case <-ctx.Done():
			return [6]byte{}, fmt.Errorf("%w: %v: %w", engine.ErrNoNeighbor, netip.AddrFrom4(ip), ctx.Err())
		}
	}
	return r.macs.Resolve(ctx, ip)
}

// TestEngineDialResolvesOffCoreLoop: over the engine adapter with resolver
// workers, an application's dial to an address whose resolution hangs
// does not hold up another application's RPCs (they complete while the
// resolver is provably still blocked), the hung dial then fails with
// ErrNoNeighbor naming the address, and a dial beyond the resolution
// queue fails at once with ErrResolverBusy.
func TestEngineDialResolvesOffCoreLoop(t *testing.T) {
	ipA, ipB := [4]byte{10, 9, 1, 1}, [4]byte{10, 9, 1, 2}
	dead1, dead2, dead3 := [4]byte{10, 9, 1, 101}, [4]byte{10, 9, 1, 102}, [4]byte{10, 9, 1, 103}
	macA, macB := [6]byte{2, 0, 0, 0, 1, 1}, [6]byte{2, 0, 0, 0, 1, 2}
	la, lb := engine.NewMemPipe(engine.MemConfig{}, macA, macB)
	static := engine.StaticResolver{ipA: macA, ipB: macB}
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	gr := &gateResolver{macs: static, gates: map[[4]byte]chan struct{}{dead1: gate1, dead2: gate2}, waiting: make(chan [4]byte, 4)}

	// A: the adapter resolves with one worker and a queue of one address.
	tr := NewEngineTransport(EngineTransportConfig{Resolvers: []engine.Resolver{gr}, ResolveQueue: 1, DialTimeout: time.Minute})
	st, err := engine.New(engine.Config{
		Link: la, Endpoint: ndp.Config{LocalIP: ipA, Seed: 1},
		Resolver: tr.Resolver(), NoBackground: true, OnEvent: tr.OnEvent,
	})
	if err != nil {
		t.Fatal(err)
	}
	tr.Bind(st, -1)
	ha := startHarnessOn(t, smallConfig(), ServerConfig{}, tr)
	t.Cleanup(func() {
		ha.stop()
		st.Close()
	})
	hb := engineHarness(t, lb, ipB, 2, static)
	l, err := hb.attach().Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go echoServer(t, l)
	live, stuck := ha.attach(), ha.attach()
	rpc := func(i int) {
		t.Helper()
		msg := payload(200+i, byte(i))
		s, err := live.Dial(netip.AddrPortFrom(netip.AddrFrom4(ipB), 7), DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dl := time.Now().Add(20 * time.Second)
		s.Write(msg, dl, nil)
		s.CloseWrite()
		got, err := readAll(s, dl)
		s.Close()
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("rpc %d: %v, %d bytes", i, err, len(got))
		}
	}
	rpc(0) // the first dial to B is resolved by the worker too

	dial := func(ip [4]byte) *ClientSock {
		t.Helper()
		s, err := stuck.Dial(netip.AddrPortFrom(netip.AddrFrom4(ip), 7), DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte("hello"), time.Now().Add(5*time.Second), nil); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1 := dial(dead1) // occupies the only worker (gate1 stays shut)
	select {
	case ip := <-gr.waiting:
		if ip != dead1 {
			t.Fatalf("resolver waits on %v", ip)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the resolution of the first address did not start")
	}
	s2 := dial(dead2) // queued
	s3 := dial(dead3) // no room: refused at once
	_, err = s3.Read(make([]byte, 8), time.Now().Add(10*time.Second), nil)
	if !errors.Is(err, ErrResolverBusy) {
		t.Fatalf("dial beyond the resolution queue: %v, want ErrResolverBusy", err)
	}
	s3.Close()
	// The worker is still blocked in dead1's resolution (gate1 is shut):
	// every RPC of the other application completes meanwhile.
	for i := 1; i <= 50; i++ {
		rpc(i)
	}
	close(gate1) // dead1 has no MAC: its resolution fails
	for _, s := range []*ClientSock{s1} {
		_, err := s.Read(make([]byte, 8), time.Now().Add(10*time.Second), nil)
		if !errors.Is(err, engine.ErrNoNeighbor) || !strings.Contains(err.Error(), "10.9.1.101") {
			t.Fatalf("dial to an unresolvable address: %v, want ErrNoNeighbor naming it", err)
		}
		s.Close()
	}
	close(gate2)
	if _, err := s2.Read(make([]byte, 8), time.Now().Add(10*time.Second), nil); !errors.Is(err, engine.ErrNoNeighbor) {
		t.Fatalf("queued dial: %v, want ErrNoNeighbor", err)
	}
	s2.Close()
	rpc(51)
	snap := poolSettled(t, ha.path, 2)
	if snap.Core.DialsDeferred != 3 || snap.Core.DialsUnresolved != 2 {
		t.Fatalf("core counters %+v", snap.Core)
	}
}

// TestEngineDialCancelledAfterResolution: one resolution result makes every
// dial waiting on its address at once, but Events hands their TEDialed out
// at most len(dst) at a time; a dial the core cancels (Abort or Release of
// its pending ID: the app aborted, closed or died) between two Events calls
// must not leave the connection made for it open in the Stack, nor report
// it.
func TestEngineDialCancelledAfterResolution(t *testing.T) {
	ipA, ipB := [4]byte{10, 9, 2, 1}, [4]byte{10, 9, 2, 2}
	macA, macB := [6]byte{2, 0, 0, 0, 2, 1}, [6]byte{2, 0, 0, 0, 2, 2}
	la, _ := engine.NewMemPipe(engine.MemConfig{}, macA, macB)
	gate := make(chan struct{})
	gr := &gateResolver{macs: engine.StaticResolver{ipB: macB}, gates: map[[4]byte]chan struct{}{ipB: gate}, waiting: make(chan [4]byte, 1)}
	tr := NewEngineTransport(EngineTransportConfig{Resolvers: []engine.Resolver{gr}, DialTimeout: time.Minute})
	st, err := engine.New(engine.Config{
		Link: la, Endpoint: ndp.Config{LocalIP: ipA, Seed: 1},
		Resolver: tr.Resolver(), NoBackground: true, OnEvent: tr.OnEvent,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tr.Bind(st, -1)
	var ids [3]ConnID
	for i := range ids {
		id, pending, err := tr.Dial(netip.AddrPortFrom(netip.AddrFrom4(ipB), 7), DialOptions{})
		if err != nil || !pending {
			t.Fatalf("dial %d: pending %v, %v", i, pending, err)
		}
		ids[i] = id
	}
	woke := make(chan struct{}, 1)
	tr.SetWakeup(func() { signalChan(woke) }) // after the result is published
	<-gr.waiting
	close(gate)
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("no resolution result")
	}
	var one [1]TransportEvent
	if n := tr.Events(one[:]); n != 1 || one[0].Kind != TEDialed || one[0].Conn != ids[0] || one[0].Err != nil {
		t.Fatalf("first Events: %d %+v", n, one[0])
	}
	tr.Abort(ids[1], ndp.ResetAbort)
	tr.Release(ids[2])
	var rest [8]TransportEvent
	if n := tr.Events(rest[:]); n != 0 {
		t.Fatalf("Events after cancelling the other dials: %d events, first %+v", n, rest[0])
	}
	if len(tr.conns) != 1 || tr.conns[one[0].Dialed] == nil {
		t.Fatalf("%d connections open in the adapter, want only the first dial's", len(tr.conns))
	}
	if len(tr.dialing) != 0 || len(tr.dialed) != 0 || len(tr.resolving) != 0 {
		t.Fatalf("pending state left: dialing %d dialed %d resolving %d", len(tr.dialing), len(tr.dialed), len(tr.resolving))
	}
}

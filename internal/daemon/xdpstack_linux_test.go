package daemon

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
)

// xdpDaemon is a core over OpenXDPStack on veth end l (inside ns).
func xdpDaemon(t *testing.T, ns *testbed.Namespace, l testbed.Link, tc EngineTransportConfig) (*harness, *engine.Stack) {
	t.Helper()
	var st *engine.Stack
	var tr *EngineTransport
	err := ns.Do(func() error {
		var err error
		st, tr, err = OpenXDPStack(engine.XDPConfig{Interface: l.Name},
			engine.Config{Endpoint: ndp.Config{LocalIP: l.Addr.Addr().As4(), Seed: 5}, LinkRate: 10e9}, tc)
		return err
	})
	if err != nil {
		t.Fatalf("OpenXDPStack in %s: %v", ns.Name, err)
	}
	h := startHarnessOn(t, smallConfig(), ServerConfig{}, tr)
	t.Cleanup(func() {
		h.stop()
		st.Close()
	})
	return h, st
}

// embeddedEcho runs an engine stack (background poller) on veth end l
// inside ns, echoing every connection on port 7.
func embeddedEcho(t *testing.T, ns *testbed.Namespace, l testbed.Link) {
	t.Helper()
	var st *engine.Stack
	err := ns.Do(func() error {
		link, err := engine.OpenXDP(engine.XDPConfig{Interface: l.Name})
		if err != nil {
			return err
		}
		res, err := engine.NewKernelResolver(link.Ifindex(), link.Name())
		if err != nil {
			link.Close()
			return err
		}
		st, err = engine.New(engine.Config{Link: link, Resolver: res, Endpoint: ndp.Config{LocalIP: l.Addr.Addr().As4(), Seed: 6}, LinkRate: 10e9})
		if err != nil {
			res.Close()
			link.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("echo stack in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { st.Close() })
	ln, err := st.Listen(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept(nil)
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var data []byte
				buf := make([]byte, 16<<10)
				for {
					n, err := c.Read(buf, nil)
					data = append(data, buf[:n]...)
					if err == io.EOF {
						break
					}
					if err != nil {
						return
					}
				}
				c.Write(data, true, nil)
			}()
		}
	}()
}

// TestXDPDialToSilentAddressDoesNotStall: ndpd (a core over AF_XDP on
// veth) serves app A's RPCs to a live peer while app B dials an address
// in the subnet that nobody answers. The kernel's ARP for it is pending
// the whole time; A's RPCs keep their latency (the core loop never waits
// for the resolution) and B gets ErrNoNeighbor naming the address once
// the resolution times out. Before resolution moved off the core loop,
// every RPC issued meanwhile waited for the whole DialTimeout.
func TestXDPDialToSilentAddressDoesNotStall(t *testing.T) {
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const resolveTimeout = time.Second // the default DialTimeout
	h, _ := xdpDaemon(t, p.A, p.Veth.A, EngineTransportConfig{DialTimeout: resolveTimeout})
	embeddedEcho(t, p.B, p.Veth.B)
	live := netip.AddrPortFrom(p.Veth.B.Addr.Addr(), 7)
	silentIP := p.Veth.B.Addr.Addr().As4()
	silentIP[3] = 99 // same /24, nobody there
	silent := netip.AddrPortFrom(netip.AddrFrom4(silentIP), 7)

	appA, appB := h.attach(), h.attach()
	rpc := func(i int) time.Duration {
		t.Helper()
		msg := payload(64, byte(i))
		start := time.Now()
		s, err := appA.Dial(live, DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dl := start.Add(10 * time.Second)
		if _, err := s.Write(msg, dl, nil); err != nil {
			t.Fatalf("rpc %d write: %v", i, err)
		}
		s.CloseWrite()
		got, err := readAll(s, dl)
		took := time.Since(start)
		s.Close()
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("rpc %d: %v, %d bytes", i, err, len(got))
		}
		return took
	}
	// Warm up; the first dial resolves B's MAC through the kernel (under a
	// heavily loaded machine its ARP has been seen to miss one resolution
	// window: retry that once, it is not what this test is about).
	if s, err := appA.Dial(live, DialOptions{}); err == nil {
		s.Write([]byte("x"), time.Now().Add(10*time.Second), nil)
		s.CloseWrite()
		if _, err := readAll(s, time.Now().Add(10*time.Second)); errors.Is(err, engine.ErrNoNeighbor) {
			t.Logf("first resolution of the live peer failed (%v); retrying", err)
		}
		s.Close()
	}
	for i := 0; i < 20; i++ {
		rpc(i)
	}

	s, err := appB.Dial(silent, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("anyone?"), time.Now().Add(5*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	dialErr := make(chan error, 1)
	dialStart := time.Now()
	go func() {
		_, err := s.Read(make([]byte, 16), time.Now().Add(10*time.Second), nil)
		dialErr <- err
	}()
	var lat []time.Duration
	var bErr error
	var bTook time.Duration
loop:
	for i := 0; ; i++ {
		lat = append(lat, rpc(100+i))
		select {
		case bErr = <-dialErr:
			bTook = time.Since(dialStart)
			break loop
		default:
		}
	}
	s.Close()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, max := lat[len(lat)/2], lat[len(lat)-1]
	t.Logf("%d RPCs while B's dial waited %v for ARP: p50 %v, max %v; B: %v", len(lat), bTook.Round(time.Millisecond), p50, max, bErr)
	if !errors.Is(bErr, engine.ErrNoNeighbor) || !strings.Contains(bErr.Error(), silent.String()) {
		t.Fatalf("dial to a silent address: %v, want ErrNoNeighbor naming %v", bErr, silent)
	}
	if bTook < resolveTimeout/2 {
		t.Fatalf("the silent dial failed after %v, before its resolution could time out", bTook)
	}
	if len(lat) < 10 {
		t.Fatalf("only %d RPCs completed in %v while B's dial was pending", len(lat), bTook)
	}
	// A core loop that waited for the resolution would hold at least one
	// RPC for all of it (1s), and the RPC count above would be ~1. The
	// bound leaves room for a loaded machine: under -race with three suites
	// at once single RPCs of 60-470 ms were seen with no silent dial at all
	// (p50 2 ms); alone, max is a few ms.
	if max >= resolveTimeout*3/4 {
		t.Fatalf("RPC max latency %v while another app's dial waited for ARP (want < %v: the core loop must not wait)", max, resolveTimeout*3/4)
	}
	poolSettled(t, h.path, 2)
}

package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
	"golang.org/x/sys/unix"
)

type vethPair struct {
	pair     *testbed.Pair
	a, b     *Stack
	ipA, ipB [4]byte
}

// openXDPStack opens an AF_XDP link, a kernel resolver and a Stack inside ns.
func openXDPStack(t testing.TB, ns *testbed.Namespace, l testbed.Link, tweak func(*Config), seed uint64) *Stack {
	t.Helper()
	return openXDPStackLink(t, ns, XDPConfig{Interface: l.Name}, l, tweak, seed)
}

// openXDPStackLink is openXDPStack with the link's configuration.
func openXDPStackLink(t testing.TB, ns *testbed.Namespace, xc XDPConfig, l testbed.Link, tweak func(*Config), seed uint64) *Stack {
	t.Helper()
	var s *Stack
	err := ns.Do(func() error {
		link, err := OpenXDP(xc)
		if err != nil {
			return err
		}
		res, err := NewKernelResolver(link.Ifindex(), link.Name())
		if err != nil {
			link.Close()
			return err
		}
		cfg := Config{
			Link:     link,
			Endpoint: ndp.Config{LocalIP: l.Addr.Addr().As4(), Seed: seed, MaxConns: 4096},
			Resolver: res,
			LinkRate: 10e9,
		}
		if tweak != nil {
			tweak(&cfg)
		}
		s, err = New(cfg)
		if err != nil {
			link.Close()
			res.Close()
		}
		return err
	})
	if err != nil {
		t.Fatalf("open stack in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newVethPair(t testing.TB, mode PollMode) *vethPair {
	t.Helper()
	return newVethPairCfg(t, func(c *Config) { c.Mode = mode })
}

func newVethPairCfg(t testing.TB, tweak func(*Config)) *vethPair {
	t.Helper()
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := &vethPair{pair: p, ipA: p.Veth.A.Addr.Addr().As4(), ipB: p.Veth.B.Addr.Addr().As4()}
	v.a = openXDPStack(t, p.A, p.Veth.A, tweak, 11)
	v.b = openXDPStack(t, p.B, p.Veth.B, tweak, 22)
	return v
}

func TestXDPEchoNewConnPerRPC(t *testing.T) {
	v := newVethPair(t, PollAdaptive)
	l, err := v.b.Listen(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, l)
	const n = 10000
	start := time.Now()
	for i := 0; i < n; i++ {
		req := []byte(fmt.Sprintf("rpc %d", i))
		resp, err := call(v.a, v.ipB, 7, req)
		if err != nil {
			t.Fatalf("rpc %d: %v", i, err)
		}
		if !bytes.Equal(resp, req) {
			t.Fatalf("rpc %d: echo %q", i, resp)
		}
	}
	d := time.Since(start)
	st := v.a.Stats()
	t.Logf("%d RPCs on new connections in %v (%v each); client stats: %+v", n, d, d/time.Duration(n), st.Endpoint)
	if st.Endpoint.ConnsOpened < uint64(n) {
		t.Errorf("ConnsOpened %d < %d", st.Endpoint.ConnsOpened, n)
	}
}

func TestXDPTransfer100MB(t *testing.T) {
	v := newVethPair(t, PollAdaptive)
	const size = 100 << 20
	l, err := v.b.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		sum [32]byte
		n   int
		err error
	}
	got := make(chan result, 1)
	// A stalled transfer fails within two minutes with both stacks' counters instead
	// of blocking until the package timeout (docs/decisions.md, "Lazy wait channels").
	stall := make(chan struct{})
	watchdog := time.AfterFunc(2*time.Minute, func() { close(stall) })
	defer watchdog.Stop()
	stalled := func(where string, err error) {
		t.Helper()
		t.Fatalf("%s: %v\nsender stats %+v\nreceiver stats %+v", where, err, v.a.Stats(), v.b.Stats())
	}
	go func() {
		c, err := l.Accept(stall)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		h := sha256.New()
		buf := make([]byte, 256<<10)
		total := 0
		for {
			n, err := c.Read(buf, stall)
			h.Write(buf[:n])
			total += n
			if err != nil {
				if err.Error() == "EOF" {
					err = nil
				}
				var sum [32]byte
				copy(sum[:], h.Sum(nil))
				got <- result{sum, total, err}
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(7, 7))
	h := sha256.New()
	c, err := v.a.Dial(context.Background(), v.ipB, 9, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for sent := 0; sent < size; sent += len(buf) {
		for i := 0; i < len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
		}
		h.Write(buf)
		if _, err := c.Write(buf, sent+len(buf) >= size, stall); err != nil {
			stalled(fmt.Sprintf("write at %d", sent), err)
		}
	}
	for {
		_, err := c.Read(buf, stall)
		if err == io.EOF {
			break
		}
		if err != nil {
			stalled("reading the receiver's close", err)
		}
	}
	c.Close()
	var r result
	select {
	case r = <-got:
	case <-time.After(90 * time.Second):
		t.Fatal("receiver did not finish")
	}
	d := time.Since(start)
	if r.err != nil {
		stalled("receiver", r.err)
	}
	if r.n != size || !bytes.Equal(r.sum[:], h.Sum(nil)) {
		t.Fatalf("received %d bytes, sha256 match %v", r.n, bytes.Equal(r.sum[:], h.Sum(nil)))
	}
	t.Logf("%d MB in %v = %.0f Mb/s; sender %+v", size>>20, d, float64(size*8)/d.Seconds()/1e6, v.a.Stats().Endpoint)
	for _, s := range []*Stack{v.a, v.b} {
		if xl, ok := s.link.(*XDPLink); ok {
			qs, _ := xl.Port().Stats()
			t.Logf("AF_XDP %s: %+v", xl.Name(), qs)
		}
	}
}

func TestXDPConcurrentConns(t *testing.T) {
	v := newVethPair(t, PollAdaptive)
	l, _ := v.b.Listen(7, 0)
	echoServer(t, l)
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req := bytes.Repeat([]byte{byte(i)}, 100+i*10)
			resp, err := call(v.a, v.ipB, 7, req)
			if err == nil && !bytes.Equal(resp, req) {
				err = fmt.Errorf("conn %d: bad echo (%d bytes)", i, len(resp))
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestXDPRefused(t *testing.T) {
	v := newVethPair(t, PollAdaptive)
	c, err := v.a.Dial(context.Background(), v.ipB, 4444, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Write([]byte("anyone?"), true, nil)
	_, err = c.Read(make([]byte, 16), nil)
	if !errors.Is(err, ndp.ErrConnRefused) {
		t.Fatalf("got %v, want ErrConnRefused", err)
	}
	t.Logf("refused after %v: %v", time.Since(start), err)
	if time.Since(start) > 2*time.Second {
		t.Errorf("refusal took %v", time.Since(start))
	}
}

// TestXDPHostileFrames injects garbage at A's NDP port from B's namespace
// (kernel UDP datagrams with fuzzed payloads, valid NDP frames for unknown
// connections, frames with bad checksums through a packet socket) while B
// keeps making RPCs to A. The garbage is counted and dropped.
func TestXDPHostileFrames(t *testing.T) {
	v := newVethPair(t, PollAdaptive)
	l, _ := v.a.Listen(7, 0)
	echoServer(t, l)
	before := v.a.Stats()

	var udpFd, pktFd int
	err := v.pair.B.Do(func() error {
		var err error
		udpFd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		pktFd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(udpFd)
	defer unix.Close(pktFd)
	dst := &unix.SockaddrInet4{Port: int(ndp.DefaultPort), Addr: v.ipA}
	ll := &unix.SockaddrLinklayer{Ifindex: v.pair.Veth.B.Index, Halen: 6}
	copy(ll.Addr[:], v.pair.Veth.A.MAC)

	const hostile = 600
	done := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		rng := rand.New(rand.NewPCG(3, 4))
		buf := make([]byte, 1600)
		count := 0
		defer func() { sent <- count }()
		for i := 0; i < hostile; i++ {
			switch i % 3 {
			case 0: // fuzzed NDP header + payload in a valid UDP datagram
				n := rng.IntN(200)
				for j := 0; j < n; j++ {
					buf[j] = byte(rng.Uint32())
				}
				if rng.IntN(2) == 0 && n > 2 {
					buf[0] = 1 // plausible version byte
				}
				if unix.Sendto(udpFd, buf[:n], 0, dst) == nil {
					count++
				}
			case 1, 2: // a well-formed NDP frame for a connection nobody has
				f := ndp.Frame{
					DstMAC: [6]byte(v.pair.Veth.A.MAC), SrcMAC: [6]byte(v.pair.Veth.B.MAC),
					SrcIP: v.ipB, DstIP: v.ipA, SrcPort: 40000, DstPort: ndp.DefaultPort,
					Header: ndp.Header{Type: ndp.PacketType(1 + rng.IntN(4)), SrcPort: 555, DstPort: uint16(rng.IntN(65536)), ConnID: rng.Uint32(), Seq: rng.Uint32()},
				}
				n, err := ndp.BuildFrame(buf, &f)
				if err != nil {
					continue
				}
				if i%3 == 2 {
					buf[n-1] ^= 0xff // corrupt: the UDP checksum no longer verifies
					if n == ndp.HeaderOverhead {
						buf[ndp.HeaderOverhead-14] ^= 0x5a
					}
				}
				if unix.Sendto(pktFd, buf[:n], 0, ll) == nil {
					count++
				}
			}
			if i%50 == 0 {
				select {
				case <-done:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}
	}()
	for i := 0; i < 300; i++ {
		req := []byte(fmt.Sprintf("still here %d", i))
		resp, err := call(v.b, v.ipA, 7, req)
		if err != nil || !bytes.Equal(resp, req) {
			close(done)
			t.Fatalf("rpc %d during hostile traffic: %q, %v", i, resp, err)
		}
	}
	close(done)
	n := <-sent
	// Let the last garbage arrive, then check it was all counted.
	deadline := time.Now().Add(5 * time.Second)
	var after Stats
	for {
		after = v.a.Stats()
		if after.RxRejected-before.RxRejected >= uint64(n) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rej := after.RxRejected - before.RxRejected
	e := after.Endpoint
	t.Logf("sent %d hostile frames; rejected %d (malformed %d, unknown conn %d, wrong port %d)", n, rej, e.Malformed, e.UnknownConn, e.WrongPort)
	if rej < uint64(n) {
		t.Errorf("only %d of %d hostile frames counted as rejected", rej, n)
	}
	if e.Malformed == 0 || e.UnknownConn == 0 {
		t.Errorf("expected both malformed and unknown-connection rejects: %+v", e)
	}
	_ = netip.Addr{}
	_ = net.IPv4len
}

// TestXDPBulkNoAllocsPerPacket is TestBulkNoAllocsPerPacket over AF_XDP on
// a veth pair: UMEM frames, rings, kicks and ppoll sleeps allocate nothing
// per packet either.
func TestXDPBulkNoAllocsPerPacket(t *testing.T) {
	v := newVethPair(t, PollAdaptive)
	checkBulkAllocs(t, v.a, v.b, v.ipB)
}

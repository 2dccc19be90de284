package daemon

import (
	"bytes"
	"net/netip"
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

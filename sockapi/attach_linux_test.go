package sockapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/ndpstack/ndpstack/internal/daemon"
	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/ring"
)

// testDaemon is an in-process ndpd: a daemon.Core over an engine.Stack on
// one end of an in-memory cable, with its control socket in a temp dir.
type testDaemon struct {
	core *daemon.Core
	srv  *daemon.Server
	st   *engine.Stack
	path string
	done chan error
}

func startTestDaemon(t *testing.T, l engine.Link, ip [4]byte, seed uint64, res engine.Resolver) *testDaemon {
	t.Helper()
	tr := daemon.NewEngineTransport(daemon.EngineTransportConfig{})
	st, err := engine.New(engine.Config{Link: l, Endpoint: ndp.Config{LocalIP: ip, Seed: seed}, Resolver: res, NoBackground: true, OnEvent: tr.OnEvent})
	if err != nil {
		t.Fatal(err)
	}
	tr.Bind(st, -1)
	core, err := daemon.NewCore(daemon.Config{
		Pool:         ring.PoolConfig{Frames: 2048, FrameSize: 2048, AppFrames: 256},
		Region:       ring.RegionConfig{Sockets: 16},
		DrainTimeout: 100 * time.Millisecond,
		LocalAddr:    netip.AddrFrom4(ip),
	}, tr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ndpd.sock")
	srv, err := daemon.Listen(daemon.ServerConfig{Path: path}, core)
	if err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{core: core, srv: srv, st: st, path: path, done: make(chan error, 1)}
	go func() { d.done <- core.Run() }()
	go srv.Serve()
	t.Cleanup(func() { d.stop(); st.Close() })
	return d
}

func (d *testDaemon) stop() {
	d.srv.StopAccepting()
	d.core.Drain()
	<-d.core.Stopped()
	d.srv.Close()
}

func attachedPair(t *testing.T) (client, server *Stack, d *testDaemon) {
	t.Helper()
	ipA, ipB := [4]byte{10, 7, 0, 1}, [4]byte{10, 7, 0, 2}
	macA, macB := [6]byte{2, 0, 0, 0, 7, 1}, [6]byte{2, 0, 0, 0, 7, 2}
	la, lb := engine.NewMemPipe(engine.MemConfig{}, macA, macB)
	res := engine.StaticResolver{ipA: macA, ipB: macB}
	da := startTestDaemon(t, la, ipA, 1, res)
	db := startTestDaemon(t, lb, ipB, 2, res)
	var err error
	if client, err = Attach(da.path); err != nil {
		t.Fatal(err)
	}
	if server, err = Attach(db.path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server, da
}

func TestAttachedStackMessagesAndConns(t *testing.T) {
	cli, srv, _ := attachedPair(t)
	if got := srv.Addr().String(); got != "10.7.0.2" {
		t.Fatalf("attached stack address %q", got)
	}
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			m, err := l.RecvMessage(0)
			if err != nil {
				return
			}
			m.Reply(append([]byte("re:"), m.Data...))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, n := range []int{0, 1, 3000, 200 << 10} {
		req := bytes.Repeat([]byte{byte(n)}, n)
		resp, err := cli.Call(ctx, "10.7.0.2:7", req, WithSize(int64(n)))
		if err != nil {
			t.Fatalf("call %d: %v", n, err)
		}
		if !bytes.Equal(resp, append([]byte("re:"), req...)) {
			t.Fatalf("call %d: response of %d bytes differs", n, len(resp))
		}
	}
	// net.Conn: deadlines and Close unblocking.
	c, err := cli.Dial(ctx, "10.7.0.2:9")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("x"))
	if _, err := c.Read(make([]byte, 4)); !errors.Is(err, ErrConnRefused) {
		t.Fatalf("read from a port nobody listens on: %v, want ErrConnRefused", err)
	}
	c.Close()
	c, err = cli.Dial(ctx, "10.7.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("no fin yet"))
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err = c.Read(make([]byte, 4))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	c.SetReadDeadline(time.Time{})
	errc := make(chan error, 1)
	go func() { _, err := c.Read(make([]byte, 4)); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read unblocked by Close: %v", err)
	}
}

// An attached stack reports its daemon's stack counters: an RPC shows.
func TestAttachedStats(t *testing.T) {
	cli, srv, _ := attachedPair(t)
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if m, err := l.RecvMessage(0); err == nil {
			m.Reply(m.Data)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Call(ctx, "10.7.0.2:7", []byte("count me")); err != nil {
		t.Fatal(err)
	}
	st, err := cli.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Endpoint.ConnsOpened != 1 || st.Endpoint.BytesOut < 8 || st.Endpoint.BytesIn < 8 || st.Polls == 0 {
		t.Fatalf("attached stack counters after one RPC: %+v", st)
	}
}

func TestAttachedStackDaemonGone(t *testing.T) {
	cli, srv, da := attachedPair(t)
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c, err := cli.Dial(context.Background(), "10.7.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello"))
	errc := make(chan error, 1)
	go func() { _, err := io.ReadAll(c); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	da.stop()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrDaemonGone) {
			t.Fatalf("read after ndpd stopped: %v, want ErrDaemonGone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read hangs after ndpd stopped")
	}
	if _, err := cli.Dial(context.Background(), "10.7.0.2:7"); !errors.Is(err, ErrDaemonGone) {
		t.Fatalf("dial after ndpd stopped: %v", err)
	}
	cli.Close()
	if _, err := cli.Listen(5); !errors.Is(err, ErrStackClosed) && !errors.Is(err, ErrDaemonGone) {
		t.Fatalf("listen after close: %v", err)
	}
}

// TestAttachedNetConn runs x/net/nettest's net.Conn conformance suite
// (deadlines, Close unblocking, concurrent Read/Write, ordering) over the
// attached backend: every byte goes app -> ring -> daemon -> NDP -> daemon
// -> ring -> app.
func TestAttachedNetConn(t *testing.T) {
	cli, srv, _ := attachedPair(t)
	var port atomic.Uint32
	port.Store(2000)
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		return connectedPair(cli, srv, "10.7.0.2", uint16(port.Add(1)))
	})
}

// The daemon's refusals map onto the package's sentinels (and keep the
// daemon's own error for the details).
func TestAttachedErrMapping(t *testing.T) {
	for _, tc := range []struct{ in, want error }{
		{daemon.ErrDaemonGone, ErrDaemonGone},
		{daemon.ErrDraining, ErrDaemonGone},
		{daemon.ErrNoSlot, ErrTooManyConns},
		{daemon.ErrResolverBusy, ErrResolverBusy},
		{daemon.ErrCanceled, os.ErrDeadlineExceeded},
		{daemon.ErrClientClosed, ErrStackClosed},
	} {
		got := attachedErr(fmt.Errorf("dial: %w", tc.in))
		if !errors.Is(got, tc.want) {
			t.Errorf("attachedErr(%v) = %v, not %v", tc.in, got, tc.want)
		}
	}
	if got := attachedErr(daemon.ErrResolverBusy); !errors.Is(got, daemon.ErrResolverBusy) {
		t.Errorf("the daemon's error is lost: %v", got)
	}
}

func TestAttachConfigClientConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  AttachConfig
		ncpu int
		want time.Duration
	}{
		{AttachConfig{}, 2, -1},
		{AttachConfig{}, 3, -1},
		{AttachConfig{}, 4, 50 * time.Microsecond},
		{AttachConfig{}, 16, 50 * time.Microsecond},
		{AttachConfig{Spin: 10 * time.Microsecond}, 2, 10 * time.Microsecond},
		{AttachConfig{Spin: -1}, 16, -1},
		{AttachConfig{PollMode: PollBusy}, 2, daemon.SpinForever},
		{AttachConfig{PollMode: PollBusy, Spin: time.Microsecond}, 16, daemon.SpinForever},
	} {
		got, err := tc.cfg.clientConfig(tc.ncpu)
		if err != nil || got.SpinFor != tc.want {
			t.Errorf("%+v on %d CPUs: SpinFor %v, %v; want %v", tc.cfg, tc.ncpu, got.SpinFor, err, tc.want)
		}
	}
	if _, err := AttachWith("/nonexistent", AttachConfig{PollMode: 7}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad PollMode: %v, want ErrInvalidConfig", err)
	}
}

// A busy-polling and an adaptive application attached to the same ndpd
// both complete RPCs at once, against a server attached to the other ndpd.
func TestAttachedBusyAndAdaptiveApps(t *testing.T) {
	_, srv, da := attachedPair(t)
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	echoServer(l, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 2)
	for _, cfg := range []AttachConfig{{PollMode: PollBusy}, {PollMode: PollAdaptive, Spin: 20 * time.Microsecond}} {
		app, err := AttachWith(da.path, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer app.Close()
		go func() {
			for i := range 200 {
				req := bytes.Repeat([]byte{byte(i)}, 100+i*37)
				resp, err := app.Call(ctx, "10.7.0.2:7", req)
				if err != nil {
					errc <- fmt.Errorf("%+v: call %d: %w", cfg, i, err)
					return
				}
				if !bytes.Equal(resp, req) {
					errc <- fmt.Errorf("%+v: call %d: response differs", cfg, i)
					return
				}
			}
			errc <- nil
		}()
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

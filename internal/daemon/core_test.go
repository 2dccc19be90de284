package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/ring"
)

// harness runs a Core over a loopTransport and a control Server in a
// temporary directory.
type harness struct {
	t    *testing.T
	core *Core
	srv  *Server
	tr   *loopTransport
	path string
	done chan error
	once sync.Once
}

func smallConfig() Config {
	return Config{
		Pool:   ring.PoolConfig{Frames: 1024, FrameSize: 2048, DaemonFrames: 512, AppFrames: 128},
		Region: ring.RegionConfig{Sockets: 16, SocketSlots: 64},
	}
}

func startHarness(t *testing.T, cfg Config, scfg ServerConfig) *harness {
	t.Helper()
	tr := newLoopTransport(64 << 10)
	h := startHarnessOn(t, cfg, scfg, tr)
	h.tr = tr
	return h
}

func startHarnessOn(t *testing.T, cfg Config, scfg ServerConfig, tr Transport) *harness {
	t.Helper()
	core, err := NewCore(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	if scfg.Path == "" {
		scfg.Path = filepath.Join(t.TempDir(), "ndpd.sock")
	}
	srv, err := Listen(scfg, core)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, core: core, srv: srv, path: scfg.Path, done: make(chan error, 1)}
	go func() { h.done <- core.Run() }()
	go srv.Serve()
	t.Cleanup(h.stop)
	return h
}

// stop drains nothing: it stops the core at once (DrainTimeout is not
// waited for when nothing is open) and closes every control connection.
func (h *harness) stop() {
	h.once.Do(func() {
		h.srv.StopAccepting()
		if err := h.core.Drain(); err != nil && !errors.Is(err, ErrStopped) {
			h.t.Errorf("drain: %v", err)
		}
		select {
		case err := <-h.done:
			if err != nil {
				h.t.Errorf("core.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			h.t.Errorf("core did not stop")
		}
		h.srv.Close()
	})
}

func (h *harness) attach() *Client {
	h.t.Helper()
	c, err := Attach(h.path, ClientConfig{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// waitFor polls cond until it holds or the timeout passes (an eventual
// state, not a timing assertion).
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s: not reached in %v (last: %s)", what, timeout, last)
}

// poolIdle waits until the pool is back to its no-application state except
// for the applications still attached, and the ledger audits clean.
func poolSettled(t *testing.T, path string, apps int) Snapshot {
	t.Helper()
	var snap Snapshot
	waitFor(t, "pool settled", 10*time.Second, func() (bool, string) {
		var err error
		snap, err = QueryStatus(path)
		if err != nil {
			return false, err.Error()
		}
		p := snap.Pool
		ok := p.Lent == 0 && p.InFlight == 0 && p.DaemonHeld == 0 && p.DaemonFree == p.DaemonFrames &&
			p.AppsAttached == apps && p.AppsDraining == 0 && p.AppOwned == uint32(apps)*p.AppFrames && snap.PoolAudit == ""
		return ok, fmt.Sprintf("%+v audit=%q", p, snap.PoolAudit)
	})
	return snap
}

func echoServer(t *testing.T, l *ClientListener) {
	for {
		s, err := l.Accept(time.Time{}, nil)
		if err != nil {
			return
		}
		go func() {
			defer s.Close()
			data, err := readAll(s, time.Now().Add(20*time.Second))
			if err != nil {
				t.Errorf("server read: %v", err)
				return
			}
			if _, err := s.Write(data, time.Now().Add(20*time.Second), nil); err != nil {
				t.Errorf("server write: %v", err)
				return
			}
			if err := s.CloseWrite(); err != nil {
				t.Errorf("server closewrite: %v", err)
			}
		}()
	}
}

func readAll(s *ClientSock, deadline time.Time) ([]byte, error) {
	var out []byte
	buf := make([]byte, 16<<10)
	for {
		n, err := s.Read(buf, deadline, nil)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

func call(t *testing.T, c *Client, port uint16, msg []byte) []byte {
	t.Helper()
	s, err := c.Dial(netip.MustParseAddrPort(fmt.Sprintf("10.0.0.2:%d", port)), DialOptions{Size: int64(len(msg))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(20 * time.Second)
	if _, err := s.Write(msg, deadline, nil); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatalf("closewrite: %v", err)
	}
	got, err := readAll(s, deadline)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return got
}

func TestEchoThroughCore(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	srvApp, cliApp := h.attach(), h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go echoServer(t, l)
	// Sizes: empty, one byte, one frame, a frame and a byte, more than the
	// partition (128 frames of 2 KiB) and the transport buffer (64 KiB), so
	// frames must come back through completions and RX through releases.
	for i, n := range []int{0, 1, 2048, 2049, 100 << 10, 700 << 10} {
		msg := payload(n, byte(i))
		got := call(t, cliApp, 7, msg)
		if !bytes.Equal(got, msg) {
			t.Fatalf("size %d: echo differs (got %d bytes)", n, len(got))
		}
	}
	// Many small calls reuse dial and accept slots (16-slot region).
	for i := 0; i < 200; i++ {
		msg := payload(100+i, byte(i))
		if got := call(t, cliApp, 7, msg); !bytes.Equal(got, msg) {
			t.Fatalf("call %d: echo differs", i)
		}
	}
	snap := poolSettled(t, h.path, 2)
	if len(snap.Apps) != 2 || snap.Apps[0].Counters.BadCommands+snap.Apps[1].Counters.BadCommands != 0 {
		t.Fatalf("apps %+v", snap.Apps)
	}
	waitFor(t, "transport connections released", 5*time.Second, func() (bool, string) {
		return h.tr.live() == 0, fmt.Sprint(h.tr.live())
	})
}

func TestConcurrentCalls(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	srvApp, cliApp := h.attach(), h.attach()
	l, err := srvApp.Listen(9)
	if err != nil {
		t.Fatal(err)
	}
	go echoServer(t, l)
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				msg := payload(1+(g*977+i*131)%20000, byte(g))
				s, err := cliApp.Dial(netip.MustParseAddrPort("10.0.0.2:9"), DialOptions{})
				if errors.Is(err, ErrNoSlot) {
					runtime.Gosched()
					i--
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				dl := time.Now().Add(20 * time.Second)
				s.Write(msg, dl, nil)
				s.CloseWrite()
				got, err := readAll(s, dl)
				s.Close()
				if err != nil || !bytes.Equal(got, msg) {
					t.Errorf("goroutine %d call %d: err %v, %d/%d bytes", g, i, err, len(got), len(msg))
					return
				}
			}
		}()
	}
	wg.Wait()
	poolSettled(t, h.path, 2)
}

func TestListenConflictsAndRefusedDial(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	a, b := h.attach(), h.attach()
	if _, err := a.Listen(5); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Listen(5); !errors.Is(err, ndp.ErrPortInUse) {
		t.Fatalf("second listen: %v, want ErrPortInUse", err)
	}
	s, err := b.Dial(netip.MustParseAddrPort("10.0.0.9:6"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("x"), time.Now().Add(5*time.Second), nil)
	_, err = s.Read(make([]byte, 10), time.Now().Add(5*time.Second), nil)
	if !errors.Is(err, ndp.ErrConnRefused) {
		t.Fatalf("read on refused dial: %v, want ErrConnRefused", err)
	}
	s.Close()
	poolSettled(t, h.path, 2)
}

// TestAppDeathReclaims: an application that vanishes with connections
// open, data in flight both ways and unread RX frames leaves the daemon
// with every frame back and no connection in the transport.
func TestAppDeathReclaims(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	srvApp := h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	victim, err := Attach(h.path, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Server side: accept and push data at the victim that it never reads.
	go func() {
		for {
			s, err := l.Accept(time.Time{}, nil)
			if err != nil {
				return
			}
			go s.Write(payload(300<<10, 1), time.Now().Add(10*time.Second), nil)
			go func() {
				readAll(s, time.Now().Add(20*time.Second))
				s.Close()
			}()
		}
	}()
	for i := 0; i < 4; i++ {
		s, err := victim.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go s.Write(payload(500<<10, 2), time.Now().Add(10*time.Second), nil)
	}
	waitFor(t, "victim holds frames", 10*time.Second, func() (bool, string) {
		snap, err := QueryStatus(h.path)
		if err != nil {
			return false, err.Error()
		}
		return snap.Pool.Lent > 0 && snap.Pool.AppOwned < 2*snap.Pool.AppFrames, fmt.Sprintf("%+v", snap.Pool)
	})
	// Death: the control connection closes without any goodbye (what the
	// kernel does when the process is killed).
	victim.ctl.Close()
	snap := poolSettled(t, h.path, 1)
	if snap.Core.AppsReclaimed != 1 {
		t.Fatalf("AppsReclaimed = %d", snap.Core.AppsReclaimed)
	}
	victim.Close()
}

func TestDaemonGoneUnblocksCalls(t *testing.T) {
	cfg := smallConfig()
	cfg.DrainTimeout = 50 * time.Millisecond // a connection stays open: do not wait for it
	h := startHarness(t, cfg, ServerConfig{})
	srvApp, cliApp := h.attach(), h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan *ClientSock, 1)
	go func() {
		s, err := l.Accept(time.Time{}, nil)
		if err == nil {
			accepted <- s
		}
	}()
	s, err := cliApp.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Write([]byte("hello"), time.Time{}, nil)
	<-accepted
	errs := make(chan error, 2)
	go func() { _, err := s.Read(make([]byte, 10), time.Time{}, nil); errs <- err }()
	go func() { _, err := l.Accept(time.Time{}, nil); errs <- err }()
	h.stop() // the daemon goes away under the running application
	for i := 0; i < 2; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrDaemonGone) {
				t.Fatalf("blocked call returned %v, want ErrDaemonGone", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("blocked call still hangs after the daemon stopped")
		}
	}
	if _, err := s.Write([]byte("x"), time.Time{}, nil); !errors.Is(err, ErrDaemonGone) {
		t.Fatalf("write after daemon exit: %v", err)
	}
	if _, err := cliApp.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{}); !errors.Is(err, ErrDaemonGone) {
		t.Fatalf("dial after daemon exit: %v", err)
	}
}

func TestRefusedCredentials(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{AllowUIDs: []uint32{uint32(os.Geteuid()) + 4242}, AllowGIDs: []uint32{uint32(os.Getegid()) + 4242}})
	_, err := Attach(h.path, ClientConfig{})
	if !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("attach: %v, want ErrNotAllowed", err)
	}
	if _, err := QueryStatus(h.path); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("status: %v, want ErrNotAllowed", err)
	}
	snap, err := h.core.Status()
	if err != nil || snap.Pool.AppsAttached != 0 {
		t.Fatalf("refused peer attached: %+v %v", snap.Pool, err)
	}
}

func TestDrainLetsConnectionsFinish(t *testing.T) {
	cfg := smallConfig()
	cfg.DrainTimeout = 20 * time.Second
	h := startHarness(t, cfg, ServerConfig{})
	srvApp, cliApp := h.attach(), h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go echoServer(t, l)
	s, err := cliApp.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := payload(50<<10, 3)
	s.Write(msg[:1000], time.Time{}, nil)
	waitFor(t, "accepted", 5*time.Second, func() (bool, string) {
		snap, _ := h.core.Status()
		return len(snap.Apps) == 2 && snap.Apps[0].OpenSockets+snap.Apps[1].OpenSockets == 2, ""
	})
	h.srv.StopAccepting()
	if err := h.core.Drain(); err != nil {
		t.Fatal(err)
	}
	// New work is refused while draining...
	s2, err := cliApp.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
	if err == nil {
		_, err = s2.Read(make([]byte, 1), time.Now().Add(5*time.Second), nil)
	}
	if !errors.Is(err, ErrDraining) {
		t.Fatalf("dial while draining: %v, want ErrDraining", err)
	}
	s2.Close()
	// ...but the open connection finishes.
	s.Write(msg[1000:], time.Time{}, nil)
	s.CloseWrite()
	got, err := readAll(s, time.Now().Add(10*time.Second))
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo during drain: %v (%d bytes)", err, len(got))
	}
	s.Close()
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
		h.done <- nil
	case <-time.After(15 * time.Second):
		t.Fatal("core did not finish draining")
	}
	if _, err := s.Read(make([]byte, 1), time.Now().Add(5*time.Second), nil); err == nil {
		t.Fatal("read after drain succeeded")
	}
}

// TestLentCapKeepsOthersServed: an application that never reads holds at
// most MaxLentPerApp daemon frames; another application's transfers still
// complete.
func TestLentCapKeepsOthersServed(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxLentPerApp = 64
	h := startHarness(t, cfg, ServerConfig{})
	srvApp, slow, fast := h.attach(), h.attach(), h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go func() { // push 2 MiB at every connection
		for {
			s, err := l.Accept(time.Time{}, nil)
			if err != nil {
				return
			}
			go func() {
				s.Write(payload(2<<20, 5), time.Now().Add(20*time.Second), nil)
				s.CloseWrite()
				readAll(s, time.Now().Add(20*time.Second))
				s.Close()
			}()
		}
	}()
	// The slow app dials and never reads.
	for i := 0; i < 4; i++ {
		s, err := slow.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Write([]byte("x"), time.Time{}, nil)
	}
	waitFor(t, "slow app at its cap", 10*time.Second, func() (bool, string) {
		snap, _ := h.core.Status()
		for _, a := range snap.Apps {
			if a.Counters.RXLentCap > 0 {
				return a.Lent == 64, fmt.Sprintf("%+v", a)
			}
		}
		return false, fmt.Sprintf("%+v", snap.Pool)
	})
	// The fast app still gets its 2 MiB.
	s, err := fast.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.CloseWrite()
	got, err := readAll(s, time.Now().Add(20*time.Second))
	if err != nil || len(got) != 2<<20 {
		t.Fatalf("fast app: %v, %d bytes", err, len(got))
	}
	s.Close()
	snap, _ := h.core.Status()
	for _, a := range snap.Apps {
		if a.Lent > 64 {
			t.Fatalf("app %d holds %d frames, cap 64", a.App, a.Lent)
		}
	}
}

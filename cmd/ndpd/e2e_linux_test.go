package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/daemon"
	"github.com/ndpstack/ndpstack/internal/testbed"
)

// End-to-end tests: real ndpd processes (built from this tree) in two
// network namespaces joined by a veth pair, applications attached over the
// control socket and the shared-memory rings, NDP over AF_XDP (copy mode on
// veth). Root only; NDP_REQUIRE_NETNS=1 turns the skip into a failure.

var (
	buildOnce sync.Once
	buildDir  string
	ndpdBin   string
	buildErr  error
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("NDPD_E2E_HELPER"); mode == "msgserve" {
		os.Exit(msgServeMain())
	} else if mode != "" {
		os.Exit(helperMain(mode))
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// helperMain is the application subprocess of the SIGKILL and uid tests.
func helperMain(mode string) int {
	sock := os.Getenv("NDPD_E2E_SOCKET")
	c, err := daemon.Attach(sock, daemon.ClientConfig{})
	if err != nil {
		fmt.Printf("attach-error %v\n", err)
		return 3
	}
	switch mode {
	case "hold":
		// Open connections with data in flight both ways, then wait to be killed.
		remote := netip.MustParseAddrPort(os.Getenv("NDPD_E2E_REMOTE"))
		for i := 0; i < 4; i++ {
			s, err := c.Dial(remote, daemon.DialOptions{})
			if err != nil {
				fmt.Printf("dial-error %v\n", err)
				return 4
			}
			go s.Write(make([]byte, 400<<10), time.Time{}, nil)
		}
		time.Sleep(200 * time.Millisecond)
		fmt.Println("ready")
		select {}
	}
	fmt.Println("attached")
	return 0
}

func ndpdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "ndpd-e2e")
		if buildErr != nil {
			return
		}
		os.Chmod(buildDir, 0o755)
		if bin := os.Getenv("NDPD_E2E_BIN"); bin != "" {
			// Run the tests against another build (an older commit's ndpd,
			// to compare measurements side by side).
			ndpdBin = bin
			return
		}
		ndpdBin = filepath.Join(buildDir, "ndpd")
		out, err := exec.Command("go", "build", "-o", ndpdBin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ndpd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return ndpdBin
}

// ndpdProc is one ndpd subprocess.
type ndpdProc struct {
	cmd    *exec.Cmd
	sock   string
	logs   *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startNdpd(t *testing.T, ns *testbed.Namespace, ifname string, extra ...string) *ndpdProc {
	t.Helper()
	bin := ndpdBinary(t)
	sock := filepath.Join(buildDir, fmt.Sprintf("%s.sock", ns.Name))
	args := append([]string{"-interface", ifname, "-socket", sock, "-socket-mode", "0666",
		"-log-format", "console", "-drain-timeout", "2s"}, extra...)
	p := &ndpdProc{cmd: ns.Command(bin, args...), sock: sock, logs: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("ndpd in %s logs:\n%s", ns.Name, p.logs.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := daemon.QueryStatus(sock); err == nil {
			return p
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("ndpd exited at start: %v\n%s", err, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ndpd did not come up\n%s", p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits; SIGKILL if it hangs (the test then fails).
func (p *ndpdProc) stop(t *testing.T) error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
		return err
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("ndpd did not exit on SIGTERM")
		return errors.New("killed")
	}
}

type e2eBed struct {
	pair   *testbed.Pair
	a, b   *ndpdProc
	remote netip.AddrPort // B's address, port 7
}

func newE2E(t *testing.T) *e2eBed {
	t.Helper()
	testbed.RequireRoot(t)
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	e := &e2eBed{pair: p}
	e.a = startNdpd(t, p.A, p.Veth.A.Name)
	e.b = startNdpd(t, p.B, p.Veth.B.Name)
	e.remote = netip.AddrPortFrom(p.Veth.B.Addr.Addr(), 7)
	return e
}

func attachT(t *testing.T, sock string) *daemon.Client {
	t.Helper()
	c, err := daemon.Attach(sock, daemon.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readAll(s *daemon.ClientSock, deadline time.Time) ([]byte, error) {
	var out []byte
	buf := make([]byte, 32<<10)
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

func serveEcho(t *testing.T, l *daemon.ClientListener) {
	go func() {
		for {
			s, err := l.Accept(time.Time{}, nil)
			if err != nil {
				return
			}
			go func() {
				defer s.Close()
				data, err := readAll(s, time.Now().Add(30*time.Second))
				if err != nil {
					return
				}
				s.Write(data, time.Now().Add(30*time.Second), nil)
				s.CloseWrite()
			}()
		}
	}()
}

func echoCall(c *daemon.Client, remote netip.AddrPort, msg []byte) error {
	s, err := c.Dial(remote, daemon.DialOptions{Size: int64(len(msg))})
	if err != nil {
		return err
	}
	defer s.Close()
	dl := time.Now().Add(30 * time.Second)
	if _, err := s.Write(msg, dl, nil); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := s.CloseWrite(); err != nil {
		return fmt.Errorf("closewrite: %w", err)
	}
	got, err := readAll(s, dl)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo of %d bytes came back as %d different bytes", len(msg), len(got))
	}
	return nil
}

func payload(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13) ^ seed
	}
	return b
}

// poolSettled waits until the daemon's pool holds nothing for anyone but
// the apps still attached, and the ledger audits clean.
func poolSettled(t *testing.T, sock string, apps int) daemon.Snapshot {
	t.Helper()
	var snap daemon.Snapshot
	var err error
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		snap, err = daemon.QueryStatus(sock)
		p := snap.Pool
		if err == nil && p.Lent == 0 && p.InFlight == 0 && p.DaemonHeld == 0 && p.DaemonFree == p.DaemonFrames &&
			p.AppsAttached == apps && p.AppsDraining == 0 && p.AppOwned == uint32(apps)*p.AppFrames && snap.PoolAudit == "" {
			return snap
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pool of %s not settled: %v %+v audit %q", sock, err, snap.Pool, snap.PoolAudit)
	return snap
}

func TestE2EEchoThroughNdpd(t *testing.T) {
	e := newE2E(t)
	srv := attachT(t, e.b.sock)
	cli := attachT(t, e.a.sock)
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	serveEcho(t, l)
	for i, n := range []int{1, 64, 1400, 1500, 9000, 100 << 10, 1 << 20} {
		if err := echoCall(cli, e.remote, payload(n, byte(i))); err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
	}
	for i := 0; i < 200; i++ {
		if err := echoCall(cli, e.remote, payload(100, byte(i))); err != nil {
			t.Fatalf("rpc %d: %v", i, err)
		}
	}
	poolSettled(t, e.a.sock, 1)
	snap := poolSettled(t, e.b.sock, 1)
	if len(snap.Apps) != 1 || snap.Apps[0].Counters.RXBytes == 0 || len(snap.Listening) != 1 || snap.Listening[0] != 7 {
		t.Fatalf("server daemon status: %+v", snap)
	}
	// The operator's view: `ndpd status` prints the same snapshot as JSON.
	out, err := exec.Command(ndpdBinary(t), "status", "-socket", e.b.sock).Output()
	if err != nil {
		t.Fatalf("ndpd status: %v", err)
	}
	var printed daemon.Snapshot
	if err := json.Unmarshal(out, &printed); err != nil || printed.Pool.AppsAttached != 1 || printed.PoolAudit != "" {
		t.Fatalf("ndpd status output: %v\n%s", err, out)
	}
	// ... with the engine's counters: the RPCs' frames and connections.
	if eng := printed.Engine; eng == nil || eng.RxFrames == 0 || eng.Endpoint.ConnsOpened < 207 || eng.Link.TxKicks == 0 {
		t.Fatalf("ndpd status engine counters: %+v", printed.Engine)
	}
	// SIGUSR1 logs a status snapshot with the engine's counters.
	e.b.cmd.Process.Signal(syscall.SIGUSR1)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(e.b.logs.String(), "RxFrames") {
		if time.Now().After(deadline) {
			t.Fatalf("no status dump after SIGUSR1:\n%s", e.b.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestE2EKilledAppIsReclaimed(t *testing.T) {
	e := newE2E(t)
	srv := attachT(t, e.b.sock)
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	// The server reads what the victim sends, pushes data back that the
	// victim never reads, and closes when the connection dies.
	go func() {
		for {
			s, err := l.Accept(time.Time{}, nil)
			if err != nil {
				return
			}
			go s.Write(make([]byte, 300<<10), time.Now().Add(30*time.Second), nil)
			go func() {
				readAll(s, time.Now().Add(30*time.Second))
				s.Close()
			}()
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	victim := exec.Command(exe, "-test.run=^$")
	victim.Env = append(os.Environ(), "NDPD_E2E_HELPER=hold", "NDPD_E2E_SOCKET="+e.a.sock, "NDPD_E2E_REMOTE="+e.remote.String())
	out, _ := victim.StdoutPipe()
	victim.Stderr = os.Stderr
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer victim.Process.Kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("victim: %q", line)
	}
	snap, err := daemon.QueryStatus(e.a.sock)
	if err != nil || snap.Pool.AppsAttached != 1 || len(snap.Apps) != 1 || snap.Apps[0].OpenSockets == 0 {
		t.Fatalf("before kill: %v %+v", err, snap)
	}
	if snap.Apps[0].Peer.PID != int32(victim.Process.Pid) {
		t.Errorf("status pid %d, victim pid %d", snap.Apps[0].Peer.PID, victim.Process.Pid)
	}
	victim.Process.Signal(syscall.SIGKILL)
	victim.Wait()
	after := poolSettled(t, e.a.sock, 0)
	if after.Core.AppsReclaimed != 1 {
		t.Fatalf("AppsReclaimed %d", after.Core.AppsReclaimed)
	}
	// ndpd is still healthy: a new application works through it.
	serveEchoPort := uint16(8)
	l2, err := srv.Listen(serveEchoPort)
	if err != nil {
		t.Fatal(err)
	}
	serveEcho(t, l2)
	cli := attachT(t, e.a.sock)
	if err := echoCall(cli, netip.AddrPortFrom(e.remote.Addr(), serveEchoPort), payload(5000, 9)); err != nil {
		t.Fatalf("echo after the kill: %v", err)
	}
	poolSettled(t, e.a.sock, 1)
}

func TestE2EDaemonStopUnblocksApp(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) { daemonStopUnblocksApp(t, sig) })
	}
}

// daemonStopUnblocksApp: ndpd stops (SIGTERM: drain, exit 0) or dies
// (SIGKILL) under an application blocked in Read.
func daemonStopUnblocksApp(t *testing.T, sig syscall.Signal) {
	e := newE2E(t)
	srv := attachT(t, e.b.sock)
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go func() { // accept and never answer
		for {
			if _, err := l.Accept(time.Time{}, nil); err != nil {
				return
			}
		}
	}()
	cli := attachT(t, e.a.sock)
	s, err := cli.Dial(e.remote, daemon.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("question"), time.Now().Add(10*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 64), time.Time{}, nil)
		res <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the Read block (not a timing assertion)
	if sig == syscall.SIGTERM {
		if err := e.a.stop(t); err != nil {
			t.Fatalf("ndpd exit: %v (want status 0)", err)
		}
	} else {
		e.a.cmd.Process.Signal(sig)
	}
	select {
	case err := <-res:
		if !errors.Is(err, daemon.ErrDaemonGone) {
			t.Fatalf("Read returned %v, want ErrDaemonGone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still blocked after ndpd exited")
	}
	if _, err := cli.Dial(e.remote, daemon.DialOptions{}); !errors.Is(err, daemon.ErrDaemonGone) {
		t.Fatalf("Dial after ndpd exit: %v", err)
	}
	if sig == syscall.SIGTERM && !strings.Contains(e.a.logs.String(), "drain") {
		t.Errorf("no drain in the logs:\n%s", e.a.logs.String())
	}
}

func TestE2ERefusedPeer(t *testing.T) {
	testbed.RequireRoot(t)
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Only uid 0 may attach; the socket file itself is world-writable, so
	// the refusal below is SO_PEERCRED's, not the file permission's.
	d := startNdpd(t, p.A, p.Veth.A.Name, "-allow-uids", "0")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary must be executable by the unprivileged uid.
	exeCopy := filepath.Join(buildDir, "helper.test")
	if data, err := os.ReadFile(exe); err != nil || os.WriteFile(exeCopy, data, 0o755) != nil {
		t.Fatalf("copy test binary: %v", err)
	}
	for _, tc := range []struct {
		uid, gid uint32
		want     string
	}{
		{65534, 65534, "attach-error"},
		{0, 0, "attached"},
	} {
		cmd := exec.Command(exeCopy, "-test.run=^$")
		cmd.Env = append(os.Environ(), "NDPD_E2E_HELPER=attach", "NDPD_E2E_SOCKET="+d.sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: tc.gid}}
		out, _ := cmd.Output()
		if !strings.HasPrefix(string(out), tc.want) {
			t.Fatalf("uid %d: helper said %q, want %q", tc.uid, out, tc.want)
		}
		if tc.want == "attach-error" && !strings.Contains(string(out), "not allowed") {
			t.Fatalf("uid %d refused for the wrong reason: %q", tc.uid, out)
		}
	}
	if !strings.Contains(d.logs.String(), "refused peer") {
		t.Errorf("refusal not logged:\n%s", d.logs.String())
	}
	// The attached helper has exited; ndpd reclaims it when it sees the control
	// connection close, which the core handles in its own loop: wait for it,
	// bounded.
	var snap daemon.Snapshot
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		snap, err = daemon.QueryStatus(d.sock)
		if err == nil && snap.Pool.AppsAttached == 0 || time.Now().After(end) {
			break
		}
	}
	if err != nil || snap.Pool.AppsAttached != 0 || snap.Core.AppsAttached != 1 {
		t.Fatalf("status after refusal: %v %+v %+v", err, snap.Pool, snap.Core)
	}
}

package afxdp

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// TestWaitWakesOnReceive checks the adaptive-mode path: Wait times out on an
// idle queue and returns as soon as a frame arrives.
func TestWaitWakesOnReceive(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	pa := openIn(t, pair.A, Config{Interface: v.A.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32})
	pb := openIn(t, pair.B, Config{Interface: v.B.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32})
	qb := pb.Queues()[0]
	if ok, err := qb.Wait(10 * time.Millisecond); ok || err != nil {
		t.Fatalf("idle Wait = %v, %v", ok, err)
	}
	woke := make(chan error, 1)
	go func() {
		ok, err := qb.Wait(10 * time.Second)
		if err == nil && !ok {
			err = errors.New("Wait timed out")
		}
		woke <- err
	}()
	sendFrames(t, pa, frameTo(v, testPort), [][]byte{[]byte("wake")})
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	got := receiveN(t, pb, qb, 1, 5*time.Second)
	if len(got) != 1 {
		t.Fatalf("received %d", len(got))
	}
}

const unprivEnv = "AFXDP_TEST_UNPRIVILEGED"

// TestUnprivilegedChild is the child half of TestOpenWithoutPrivileges.
func TestUnprivilegedChild(t *testing.T) {
	if os.Getenv(unprivEnv) == "" {
		t.Skip("helper process for TestOpenWithoutPrivileges (runs only when re-executed by it)")
	}
	_, err := Open(Config{Interface: "lo", UDPPort: testPort, NumFrames: 256, RingSize: 32})
	if !errors.Is(err, ErrPermission) {
		t.Fatalf("Open as uid %d: %v, want ErrPermission", os.Getuid(), err)
	}
	t.Logf("error reads: %v", err)
}

// TestOpenWithoutPrivileges re-executes the test binary as user nobody and
// checks Open fails with ErrPermission and a message saying what to grant.
func TestOpenWithoutPrivileges(t *testing.T) {
	testbed.RequireRoot(t)
	// The go test build directory is private to root: run a world-readable copy.
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "afxdp.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestUnprivilegedChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), unprivEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
	if !strings.Contains(string(out), "CAP_NET_ADMIN") {
		t.Fatalf("error does not say what to grant:\n%s", out)
	}
}

// TestWakeAndCloseUnblockWait: Wake ends a Wait early; Close ends a Wait
// in another goroutine with ErrClosed, and later Waits fail at once.
func TestWakeAndCloseUnblockWait(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var p *Port
	if err := pair.B.Do(func() (err error) {
		p, err = Open(Config{Interface: pair.Veth.B.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		ok, err := p.Wait(-1)
		if ok {
			err = errors.New("Wait reported frames")
		}
		res <- err
	}()
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("Wait after Wake: %v", err)
	}
	go func() {
		_, err := p.Queues()[0].Wait(-1)
		res <- err
	}()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait during Close: %v, want ErrClosed", err)
	}
	if _, err := p.Wait(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
	if err := p.Wake(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wake after Close: %v", err)
	}
	if n := p.Queues()[0].Receive(make([]Desc, 4)); n != 0 {
		t.Fatalf("Receive after Close = %d", n)
	}
	if _, err := p.Queues()[0].Transmit(make([]Desc, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Transmit after Close: %v, want net.ErrClosed", err)
	}
}

// TestReopenSameQueue closes a port and at once opens another on the same
// queue: bind meets EBUSY while the old socket is torn down and retries.
func TestReopenSameQueue(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Interface: pair.Veth.B.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32, Headroom: 128}
	for i := range 5 {
		err := pair.B.Do(func() error {
			p, err := Open(cfg)
			if err != nil {
				return err
			}
			return p.Close()
		})
		if err != nil {
			t.Fatalf("open #%d: %v", i, err)
		}
	}
}

// TestHeadroom checks received data starts after the configured headroom
// and Alloc hands out descriptors that start at it.
func TestHeadroom(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	const headroom = 128
	pa := openIn(t, pair.A, Config{Interface: v.A.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32, Headroom: headroom, FrameSize: 4096})
	pb := openIn(t, pair.B, Config{Interface: v.B.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32, Headroom: headroom, FrameSize: 4096})
	d := make([]Desc, 1)
	pa.UMEM().Alloc(d)
	if off := d[0].Addr % 4096; off != headroom {
		t.Fatalf("Alloc offset %d, want %d", off, headroom)
	}
	pa.UMEM().Release(d)
	sendFrames(t, pa, frameTo(v, testPort), [][]byte{[]byte("room")})
	rx := make([]Desc, 1)
	for deadline := time.Now().Add(5 * time.Second); pb.Queues()[0].Receive(rx) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("nothing received")
		}
	}
	if off := rx[0].Addr % 4096; off < headroom {
		t.Fatalf("received data at offset %d, inside the %d-byte headroom", off, headroom)
	}
	pb.UMEM().Release(rx)
}

package afxdp

import (
	"errors"
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

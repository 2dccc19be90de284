package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// counter makes names unique within the process; the pid makes them unique
// across processes.
var counter atomic.Uint32

func nextID() uint32 { return counter.Add(1) }

// ErrNotRoot is returned by New when the process cannot manage namespaces.
var ErrNotRoot = errors.New("testbed: needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to create network namespaces")

// Testbed owns a set of namespaces and the veth pairs between them.
type Testbed struct {
	mu      sync.Mutex
	nss     []*Namespace
	closers []io.Closer
	closed  bool
}

// New checks the prerequisites (root, the ip command) and returns an empty
// testbed. Call Close when done.
func New() (*Testbed, error) {
	if reason := missing(); reason != "" {
		if os.Geteuid() != 0 {
			return nil, fmt.Errorf("%w: %s", ErrNotRoot, reason)
		}
		return nil, errors.New("testbed: " + reason)
	}
	reapStale()
	tb := &Testbed{}
	live.mu.Lock()
	live.set[tb] = struct{}{}
	live.mu.Unlock()
	return tb, nil
}

// live is every testbed of this process that is not closed yet, for CloseAll.
var live = struct {
	mu  sync.Mutex
	set map[*Testbed]struct{}
}{set: map[*Testbed]struct{}{}}

// CloseAll closes every testbed of this process that is still open, as Close
// does each, and reports the first failure. A command that builds testbeds
// calls it when a signal ends it (ndpperf on SIGINT or SIGTERM), so nothing
// is left for the next New's reaping.
func CloseAll() error {
	live.mu.Lock()
	tbs := make([]*Testbed, 0, len(live.set))
	for tb := range live.set {
		tbs = append(tbs, tb)
	}
	live.mu.Unlock()
	var errs []error
	for _, tb := range tbs {
		if err := tb.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// reapStale deletes namespaces a testbed of a process that no longer
// exists left behind (killed by SIGKILL or a test timeout before Close).
// Only names of the form ndp<pid>-<n> with a dead pid are touched, so live
// testbeds of other processes are never disturbed.
func reapStale() {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := testbedPID(e.Name())
		if !ok || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
			_ = run("ip", "netns", "del", e.Name())
		}
	}
}

// testbedPID parses the pid out of a namespace name made by NewNamespace.
func testbedPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "ndp")
	if !ok {
		return 0, false
	}
	pidStr, n, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	if _, err := strconv.Atoi(n); err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(pidStr)
	return pid, err == nil && pid > 0
}

// NewT is New for tests: it calls RequireRoot, fails the test on error and
// registers Close with t.Cleanup (which runs even when the test fails).
func NewT(t testing.TB) *Testbed {
	t.Helper()
	RequireRoot(t)
	tb, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("testbed close: %v", err)
		}
	})
	return tb
}

// missing says why this process cannot build testbeds ("" when it can).
func missing() string {
	if os.Geteuid() != 0 {
		return "not running as root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "the ip command (iproute2) is not installed"
	}
	return ""
}

// RequireRoot skips the test with the reason when the process cannot build
// testbeds (not root, no iproute2), and fails it instead when the
// environment sets NDP_REQUIRE_NETNS=1 (CI), so a misconfigured CI run cannot
// pass by skipping.
func RequireRoot(t testing.TB) {
	t.Helper()
	reason := missing()
	if reason == "" {
		return
	}
	if os.Getenv("NDP_REQUIRE_NETNS") == "1" {
		t.Fatalf("NDP_REQUIRE_NETNS=1 but this test cannot run: %s", reason)
	}
	t.Skipf("skipping: %s (needs root and iproute2 for network namespaces; NDP_REQUIRE_NETNS=1 turns this skip into a failure)", reason)
}

// Namespace is a named network namespace (/run/netns/<name>).
type Namespace struct {
	Name string
	tb   *Testbed
}

// Path is the namespace's bind mount, usable with setns(2) by other processes.
func (ns *Namespace) Path() string { return "/run/netns/" + ns.Name }

// NewNamespace creates a namespace with its loopback up.
func (tb *Testbed) NewNamespace() (*Namespace, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		return nil, errors.New("testbed: closed")
	}
	ns := &Namespace{Name: fmt.Sprintf("ndp%d-%d", os.Getpid(), nextID()), tb: tb}
	if err := run("ip", "netns", "add", ns.Name); err != nil {
		return nil, err
	}
	tb.nss = append(tb.nss, ns)
	if err := run("ip", "-n", ns.Name, "link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	return ns, nil
}

// Namespaces returns the namespaces created so far.
func (tb *Testbed) Namespaces() []*Namespace {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]*Namespace(nil), tb.nss...)
}

// OnClose registers c to be closed by Close before any namespace is deleted, in
// reverse order of registration: a process running on the testbed's interfaces
// (a software switch) stops before its interfaces disappear.
func (tb *Testbed) OnClose(c io.Closer) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.closers = append(tb.closers, c)
}

// Close closes what OnClose registered, then deletes every namespace (and with
// them the veth ends inside). It reports the first failure but tries them all.
// Idempotent.
func (tb *Testbed) Close() error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.closed {
		return nil
	}
	tb.closed = true
	live.mu.Lock()
	delete(live.set, tb)
	live.mu.Unlock()
	var errs []error
	for i := len(tb.closers) - 1; i >= 0; i-- {
		if err := tb.closers[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(tb.nss) - 1; i >= 0; i-- {
		if err := run("ip", "netns", "del", tb.nss[i].Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Link is one end of a veth pair.
type Link struct {
	NS    *Namespace
	Name  string
	Index int
	MAC   net.HardwareAddr
	Addr  netip.Prefix // zero when none was assigned
}

// VethConfig describes a veth pair between two namespaces.
type VethConfig struct {
	// AddrA and AddrB are CIDR addresses for the two ends ("10.1.0.1/24").
	// Empty means no address.
	AddrA, AddrB string
	// MTU of both ends; zero means the kernel default (1500).
	MTU int
	// Queues is the number of RX and TX queues of each end; zero means 1.
	Queues int
	// NoRxChecksum turns off rx-checksumming (ETHTOOL_SRXCSUM) on both ends,
	// so the receiving kernel verifies IPv4/UDP checksums of frames that
	// arrive without checksum state (as AF_XDP-transmitted frames do) instead
	// of veth marking them CHECKSUM_UNNECESSARY.
	NoRxChecksum bool
	// NoTxChecksum turns off tx-checksumming (ETHTOOL_STXCSUM, and with it
	// TSO) on both ends, so the kernel sends frames with complete checksums
	// and at most MTU bytes, as toward a real NIC. A userspace switch that
	// forwards the bytes it reads (internal/softswitch) needs it: veth would
	// otherwise hand over TCP frames with only the pseudo-header summed.
	NoTxChecksum bool
}

// Veth is a veth pair: A in one namespace, B in the other.
type Veth struct{ A, B Link }

// NewVeth creates a veth pair with end A in a and end B in b, assigns the
// addresses, sets the MTU and brings both ends up.
func (tb *Testbed) NewVeth(a, b *Namespace, cfg VethConfig) (*Veth, error) {
	id := nextID()
	base := "v" + strconv.FormatUint(uint64(os.Getpid()), 36) + strconv.FormatUint(uint64(id), 36)
	nameA, nameB := base+"a", base+"b"
	if len(nameA) > unix.IFNAMSIZ-1 {
		return nil, fmt.Errorf("testbed: interface name %q too long", nameA)
	}
	args := []string{"link", "add", "name", nameA, "netns", a.Name}
	q := []string{}
	if cfg.Queues > 1 {
		q = []string{"numtxqueues", strconv.Itoa(cfg.Queues), "numrxqueues", strconv.Itoa(cfg.Queues)}
	}
	args = append(args, q...)
	args = append(args, "type", "veth", "peer", "name", nameB, "netns", b.Name)
	args = append(args, q...)
	if err := run("ip", args...); err != nil {
		return nil, err
	}
	v := &Veth{A: Link{NS: a, Name: nameA}, B: Link{NS: b, Name: nameB}}
	for _, e := range []struct {
		l    *Link
		addr string
	}{{&v.A, cfg.AddrA}, {&v.B, cfg.AddrB}} {
		ns := e.l.NS.Name
		if cfg.MTU > 0 {
			if err := run("ip", "-n", ns, "link", "set", e.l.Name, "mtu", strconv.Itoa(cfg.MTU)); err != nil {
				return nil, err
			}
		}
		if e.addr != "" {
			p, err := netip.ParsePrefix(e.addr)
			if err != nil {
				return nil, fmt.Errorf("testbed: address %q: %w", e.addr, err)
			}
			if err := run("ip", "-n", ns, "addr", "add", e.addr, "dev", e.l.Name); err != nil {
				return nil, err
			}
			e.l.Addr = p
		}
		if cfg.NoRxChecksum {
			if err := e.l.NS.Do(func() error { return setRxChecksum(e.l.Name, false) }); err != nil {
				return nil, fmt.Errorf("testbed: rx-checksum off on %s: %w", e.l.Name, err)
			}
		}
		if cfg.NoTxChecksum {
			if err := e.l.NS.Do(func() error { return setTxChecksum(e.l.Name, false) }); err != nil {
				return nil, fmt.Errorf("testbed: tx-checksum off on %s: %w", e.l.Name, err)
			}
		}
		if err := run("ip", "-n", ns, "link", "set", e.l.Name, "up"); err != nil {
			return nil, err
		}
		err := e.l.NS.Do(func() error {
			ifc, err := net.InterfaceByName(e.l.Name)
			if err != nil {
				return err
			}
			e.l.Index, e.l.MAC = ifc.Index, ifc.HardwareAddr
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("testbed: look up %s: %w", e.l.Name, err)
		}
	}
	return v, nil
}

// Pair is the common two-host topology: namespaces A and B joined by one veth.
type Pair struct {
	A, B *Namespace
	Veth *Veth
}

// NewPair creates two namespaces joined by a veth pair with cfg (AddrA/AddrB
// default to 10.<n>.0.1/24 and 10.<n>.0.2/24 for a per-process n).
func (tb *Testbed) NewPair(cfg VethConfig) (*Pair, error) {
	a, err := tb.NewNamespace()
	if err != nil {
		return nil, err
	}
	b, err := tb.NewNamespace()
	if err != nil {
		return nil, err
	}
	if cfg.AddrA == "" && cfg.AddrB == "" {
		n := 10 + nextID()%200
		cfg.AddrA = fmt.Sprintf("10.%d.0.1/24", n)
		cfg.AddrB = fmt.Sprintf("10.%d.0.2/24", n)
	}
	v, err := tb.NewVeth(a, b, cfg)
	if err != nil {
		return nil, err
	}
	return &Pair{A: a, B: b, Veth: v}, nil
}

// Enter locks the calling goroutine to its OS thread and moves the thread
// into ns. The returned exit function moves it back and unlocks; if moving
// back fails the thread stays locked (the runtime then discards it when the
// goroutine exits), so no other goroutine ever runs in the wrong namespace.
func (ns *Namespace) Enter() (exit func() error, err error) {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("testbed: open current netns: %w", err)
	}
	target, err := unix.Open(ns.Path(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(orig)
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("testbed: open netns %s: %w", ns.Name, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		unix.Close(orig)
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("testbed: setns %s: %w", ns.Name, err)
	}
	return func() error {
		defer unix.Close(orig)
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("testbed: setns back from %s: %w", ns.Name, err)
		}
		runtime.UnlockOSThread()
		return nil
	}, nil
}

// Do runs fn on a thread inside ns and returns its error.
func (ns *Namespace) Do(fn func() error) error {
	exit, err := ns.Enter()
	if err != nil {
		return err
	}
	ferr := fn()
	if err := exit(); err != nil {
		return errors.Join(ferr, err)
	}
	return ferr
}

// Command returns an exec.Cmd that runs name inside ns (ip netns exec).
func (ns *Namespace) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Run runs `ip -n <ns> args...` and returns its standard output.
func (ns *Namespace) Run(args ...string) (string, error) {
	return output("ip", append([]string{"-n", ns.Name}, args...)...)
}

func run(name string, args ...string) error {
	_, err := output(name, args...)
	return err
}

func output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("testbed: %s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// NewBridge creates a Linux bridge named name in ns and brings it up: a
// switch joining veth ends added with `ip link set <veth> master <name>`.
// The bridge forwards at layer 2 only: if the host loaded br_netfilter
// (container runtimes do), bridged frames would otherwise also traverse
// iptables, a per-packet cost no datacenter switch has, so the namespace's
// bridge-nf-call sysctls are turned off.
func (ns *Namespace) NewBridge(name string) error {
	if _, err := ns.Run("link", "add", name, "type", "bridge"); err != nil {
		return err
	}
	if _, err := ns.Run("link", "set", name, "up"); err != nil {
		return err
	}
	return ns.Do(func() error {
		for _, k := range []string{"iptables", "ip6tables", "arptables"} {
			err := os.WriteFile("/proc/sys/net/bridge/bridge-nf-call-"+k, []byte("0"), 0)
			if err != nil && !errors.Is(err, fs.ErrNotExist) { // absent: br_netfilter not loaded
				return fmt.Errorf("testbed: disable bridge netfilter in %s: %w", ns.Name, err)
			}
		}
		return nil
	})
}

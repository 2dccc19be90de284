package testbed

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPairKernelUDP(t *testing.T) {
	tb := NewT(t)
	p, err := tb.NewPair(VethConfig{MTU: 1400, Queues: 2, NoRxChecksum: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []Link{p.Veth.A, p.Veth.B} {
		if len(l.Name) > 15 || !strings.HasPrefix(l.Name, "v") || l.Index == 0 || len(l.MAC) != 6 {
			t.Fatalf("bad link %+v", l)
		}
		out, err := l.NS.Run("link", "show", "dev", l.Name)
		if err != nil || !strings.Contains(out, "mtu 1400") || !strings.Contains(out, "UP") {
			t.Fatalf("link %s: %v %q", l.Name, err, out)
		}
	}
	var srv *net.UDPConn
	if err := p.B.Do(func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: p.Veth.B.Addr.Addr().AsSlice(), Port: 7001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var cli *net.UDPConn
	if err := p.A.Do(func() (err error) {
		cli, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: p.Veth.B.Addr.Addr().AsSlice(), Port: 7001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, _, err := srv.ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	// The namespaces carry the pid and vanish on Close.
	names := []string{p.A.Name, p.B.Name}
	for _, n := range names {
		if !strings.Contains(n, "ndp"+strconv.Itoa(os.Getpid())) {
			t.Fatalf("namespace %s lacks the pid", n)
		}
	}
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := os.Stat("/run/netns/" + n); !os.IsNotExist(err) {
			t.Fatalf("namespace %s still exists after Close: %v", n, err)
		}
	}
}

func TestDoRestoresNamespace(t *testing.T) {
	tb := NewT(t)
	ns, err := tb.NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.Readlink("/proc/thread-self/ns/net")
	var inside string
	if err := ns.Do(func() error {
		inside, _ = os.Readlink("/proc/thread-self/ns/net")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inside == before {
		t.Fatalf("Do did not enter the namespace (%s)", inside)
	}
	after, _ := os.Readlink("/proc/thread-self/ns/net")
	if after != before {
		t.Fatalf("namespace not restored: %s then %s", before, after)
	}
}

func TestTestbedPID(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"ndp123-4", 123, true},
		{"ndp123-x", 0, false},
		{"ndp-4", 0, false},
		{"other", 0, false},
		{"ndp0-1", 0, false},
	} {
		pid, ok := testbedPID(tc.name)
		if ok != tc.ok || (ok && pid != tc.pid) {
			t.Errorf("testbedPID(%q) = %d, %v", tc.name, pid, ok)
		}
	}
}

func TestReapStaleNamespace(t *testing.T) {
	RequireRoot(t)
	// A pid above pid_max cannot be alive.
	name := "ndp99999999-1"
	if err := run("ip", "netns", "add", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run("ip", "netns", "del", name) })
	tb, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
		t.Fatalf("stale namespace %s survived New: %v", name, err)
	}
}

// CloseAll removes the namespaces of every open testbed, and only those:
// a testbed closed before keeps its Close a no-op.
func TestCloseAll(t *testing.T) {
	a, b, closed := NewT(t), NewT(t), NewT(t)
	var names []string
	for _, tb := range []*Testbed{a, b, closed} {
		ns, err := tb.NewNamespace()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, ns.Name)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := CloseAll(); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
			t.Errorf("namespace %s survived CloseAll: %v", name, err)
		}
	}
	live.mu.Lock()
	n := len(live.set)
	live.mu.Unlock()
	if n != 0 {
		t.Errorf("%d testbeds still open after CloseAll", n)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close after CloseAll: %v", err)
	}
}

// A bridge joins hosts at layer 2: kernel UDP crosses it between two
// namespaces, and bridged frames skip iptables (when br_netfilter exists).
func TestBridge(t *testing.T) {
	tb := NewT(t)
	br, err := tb.NewNamespace()
	if err != nil {
		t.Fatal(err)
	}
	if err := br.NewBridge("br0"); err != nil {
		t.Fatal(err)
	}
	if err := br.Do(func() error {
		b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
		if err == nil && strings.TrimSpace(string(b)) != "0" {
			t.Errorf("bridge-nf-call-iptables = %q in the bridge namespace", b)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var hosts [2]*Namespace
	var addrs [2]string
	for i := range hosts {
		if hosts[i], err = tb.NewNamespace(); err != nil {
			t.Fatal(err)
		}
		addrs[i] = "10.205.0." + strconv.Itoa(i+1)
		v, err := tb.NewVeth(hosts[i], br, VethConfig{AddrA: addrs[i] + "/24"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := br.Run("link", "set", v.B.Name, "master", "br0"); err != nil {
			t.Fatal(err)
		}
	}
	var srv *net.UDPConn
	if err := hosts[1].Do(func() (err error) {
		srv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(addrs[1]), Port: 7002})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := hosts[0].Do(func() error {
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(addrs[1]), Port: 7002})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("across the bridge"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := srv.Read(buf)
	if err != nil || string(buf[:n]) != "across the bridge" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

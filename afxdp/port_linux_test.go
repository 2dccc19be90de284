package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

const testPort = 9797

// openIn opens a Port inside ns and registers its Close with t.Cleanup.
func openIn(t *testing.T, ns *testbed.Namespace, cfg Config) *Port {
	t.Helper()
	var p *Port
	if err := ns.Do(func() (err error) {
		p, err = Open(cfg)
		return err
	}); err != nil {
		t.Fatalf("Open(%s): %v", cfg.Interface, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// udpIn binds a kernel UDP socket inside ns.
func udpIn(t *testing.T, ns *testbed.Namespace, addr netip.Addr, port int) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	if err := ns.Do(func() (err error) {
		c, err = net.ListenUDP("udp4", &net.UDPAddr{IP: addr.AsSlice(), Port: port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func frameTo(v *testbed.Veth, dstPort uint16) testbed.UDPFrame {
	return testbed.UDPFrame{
		SrcMAC: v.A.MAC, DstMAC: v.B.MAC,
		SrcIP: v.A.Addr.Addr(), DstIP: v.B.Addr.Addr(),
		SrcPort: 40000, DstPort: dstPort,
	}
}

// sendFrames builds one frame per payload in frames from p's pool and
// transmits them on q, waiting (bounded) for completion.
func sendFrames(t *testing.T, p *Port, f testbed.UDPFrame, payloads [][]byte) {
	t.Helper()
	u := p.UMEM()
	q := p.Queues()[0]
	descs := make([]Desc, len(payloads))
	if n := u.Alloc(descs); n != len(descs) {
		t.Fatalf("Alloc %d of %d", n, len(descs))
	}
	for i, pl := range payloads {
		descs[i].Len = uint32(f.Build(u.Buffer(descs[i]), pl))
	}
	sent := 0
	deadline := time.Now().Add(5 * time.Second)
	for sent < len(descs) || q.TxOutstanding() > 0 {
		n, err := q.Transmit(descs[sent:])
		if err != nil {
			t.Fatal(err)
		}
		sent += n
		if time.Now().After(deadline) {
			t.Fatalf("transmit stuck: sent %d, outstanding %d", sent, q.TxOutstanding())
		}
	}
}

func recvUDP(t *testing.T, c *net.UDPConn, timeout time.Duration) ([]byte, error) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 2048)
	n, _, err := c.ReadFromUDP(buf)
	return buf[:n], err
}

// receiveN spins on q until n frames arrived (bounded by timeout) and
// returns copies of them; frames are released.
func receiveN(t *testing.T, p *Port, q *Queue, n int, timeout time.Duration) [][]byte {
	t.Helper()
	var out [][]byte
	descs := make([]Desc, 64)
	deadline := time.Now().Add(timeout)
	for len(out) < n {
		k := q.Receive(descs)
		for _, d := range descs[:k] {
			out = append(out, append([]byte(nil), p.UMEM().Bytes(d)...))
		}
		if _, err := p.UMEM().Release(descs[:k]); err != nil {
			t.Fatal(err)
		}
		if k == 0 && time.Now().After(deadline) {
			break
		}
	}
	return out
}

func TestSteeringKernelTrafficStillWorks(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	pb := openIn(t, pair.B, Config{Interface: v.B.Name, UDPPort: testPort, NumFrames: 512, RingSize: 64})
	// Exactly one fill ring's worth of frames is with the kernel: the failed
	// zero-copy attempt of BindAuto (veth has no zero-copy) gave its back.
	if acc := pb.UMEM().Accounting(); acc.Fill != 64 || acc.Free != 512-64 || acc.Check() != nil {
		t.Fatalf("accounting after Open: %+v", acc)
	}
	t.Logf("port info: %+v", pb.Info())

	// A kernel socket on another port in B still receives (this needs ARP
	// from A to resolve B, through the attached program).
	other := udpIn(t, pair.B, v.B.Addr.Addr(), 7000)
	// A kernel socket on the NDP port in B must NOT see NDP frames.
	shadow := udpIn(t, pair.B, v.B.Addr.Addr(), testPort)
	var cli *net.UDPConn
	if err := pair.A.Do(func() (err error) {
		cli, err = net.ListenUDP("udp4", &net.UDPAddr{IP: v.A.Addr.Addr().AsSlice()})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.WriteToUDP([]byte("kernel"), &net.UDPAddr{IP: v.B.Addr.Addr().AsSlice(), Port: 7000}); err != nil {
		t.Fatal(err)
	}
	got, err := recvUDP(t, other, 5*time.Second)
	if err != nil || string(got) != "kernel" {
		t.Fatalf("kernel UDP on port 7000: %q %v", got, err)
	}
	neigh, err := pair.A.Run("neigh", "show", "dev", v.A.Name)
	if err != nil || !strings.Contains(neigh, v.B.MAC.String()) {
		t.Fatalf("ARP did not resolve %s: %q %v", v.B.Addr, neigh, err)
	}

	// Kernel-built frames to the NDP port arrive on the AF_XDP socket.
	for i := range 3 {
		if _, err := cli.WriteToUDP([]byte{'n', 'd', 'p', byte(i)}, &net.UDPAddr{IP: v.B.Addr.Addr().AsSlice(), Port: testPort}); err != nil {
			t.Fatal(err)
		}
	}
	frames := receiveN(t, pb, pb.Queues()[0], 3, 5*time.Second)
	if len(frames) != 3 {
		t.Fatalf("AF_XDP socket got %d of 3 frames", len(frames))
	}
	for i, f := range frames {
		if len(f) != testbed.UDPHeaderLen+4 || string(f[testbed.UDPHeaderLen:]) != "ndp"+string(rune(i)) ||
			binary.BigEndian.Uint16(f[36:38]) != testPort {
			t.Fatalf("frame %d: % x", i, f)
		}
	}
	if got, err := recvUDP(t, shadow, 50*time.Millisecond); err == nil {
		t.Fatalf("kernel socket on the NDP port received %q", got)
	}
	st, err := pb.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st[0].RxFrames != 3 {
		t.Fatalf("stats: %+v", st[0])
	}
	if err := pb.UMEM().Accounting().Check(); err != nil {
		t.Fatal(err)
	}
}

func TestTransmitReachesKernelWithValidChecksums(t *testing.T) {
	tb := testbed.NewT(t)
	// Rx checksumming off: the receiving kernel verifies our checksums.
	pair, err := tb.NewPair(testbed.VethConfig{NoRxChecksum: true})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	pa := openIn(t, pair.A, Config{Interface: v.A.Name, UDPPort: testPort, NumFrames: 512, RingSize: 64})
	srv := udpIn(t, pair.B, v.B.Addr.Addr(), 7100)
	f := frameTo(v, 7100)
	// A corrupted frame first: the kernel must drop it.
	u := pa.UMEM()
	bad := make([]Desc, 1)
	u.Alloc(bad)
	bad[0].Len = uint32(f.Build(u.Buffer(bad[0]), []byte("corrupt")))
	u.Buffer(bad[0])[testbed.UDPHeaderLen] ^= 1
	if _, err := pa.Queues()[0].Transmit(bad); err != nil {
		t.Fatal(err)
	}
	payloads := [][]byte{[]byte("one"), []byte("two"), make([]byte, 1400)}
	sendFrames(t, pa, f, payloads)
	for i, want := range payloads {
		got, err := recvUDP(t, srv, 5*time.Second)
		if err != nil || string(got) != string(want) {
			t.Fatalf("datagram %d: got %d bytes (%v), want %d", i, len(got), err, len(want))
		}
	}
	if got, err := recvUDP(t, srv, 50*time.Millisecond); err == nil {
		t.Fatalf("extra datagram %q (the corrupted frame was delivered: checksums are not verified)", got)
	}
	snmp, err := pair.B.Command("cat", "/proc/net/snmp").Output()
	if err != nil {
		t.Fatal(err)
	}
	if csumErrs := snmpField(string(snmp), "Udp:", "InCsumErrors"); csumErrs != "1" {
		t.Fatalf("Udp InCsumErrors = %q, want 1 (the corrupted frame)", csumErrs)
	}
	q := pa.Queues()[0]
	for q.TxOutstanding() > 0 {
		q.Complete()
	}
	if err := u.Accounting().Check(); err != nil {
		t.Fatal(err)
	}
}

func snmpField(snmp, proto, field string) string {
	var hdr []string
	for _, line := range strings.Split(snmp, "\n") {
		if !strings.HasPrefix(line, proto) {
			continue
		}
		fs := strings.Fields(line)
		if hdr == nil {
			hdr = fs
			continue
		}
		for i, h := range hdr {
			if h == field && i < len(fs) {
				return fs[i]
			}
		}
	}
	return ""
}

func TestOpenErrors(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	small := Config{UDPPort: testPort, NumFrames: 256, RingSize: 32}
	open := func(c Config) error {
		return pair.B.Do(func() error {
			p, err := Open(c)
			if err == nil {
				p.Close()
			}
			return err
		})
	}
	with := func(f func(c *Config)) Config {
		c := small
		c.Interface = v.B.Name
		f(&c)
		return c
	}
	cases := []struct {
		name string
		cfg  Config
		want error
	}{
		{"missing interface", with(func(c *Config) { c.Interface = "nope0" }), ErrNoInterface},
		{"queue out of range", with(func(c *Config) { c.Queues = []int{5} }), ErrQueueRange},
		{"zero-copy on veth", with(func(c *Config) { c.Bind = BindZeroCopy }), ErrZeroCopyUnsupported},
		{"bad config", with(func(c *Config) { c.FrameSize = 1000 }), ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := open(tc.cfg)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open: %v, want %v", err, tc.want)
			}
			t.Logf("error reads: %v", err)
		})
	}
	t.Run("program attached by someone else", func(t *testing.T) {
		openIn(t, pair.B, with(func(c *Config) { c.Queues = []int{0} }))
		err := open(with(func(c *Config) { c.Queues = []int{1} }))
		if !errors.Is(err, ErrProgramAttached) {
			t.Fatalf("second Open: %v, want ErrProgramAttached", err)
		}
		t.Logf("error reads: %v", err)
	})
	t.Run("copy and generic modes", func(t *testing.T) {
		p := openIn(t, pair.A, Config{Interface: v.A.Name, UDPPort: testPort, NumFrames: 256, RingSize: 32, Bind: BindCopy, Attach: AttachGeneric})
		in := p.Info()
		if in.ZeroCopy || in.Attach != AttachGeneric {
			t.Fatalf("info %+v", in)
		}
	})
	t.Run("serving fewer queues than the interface has is logged", func(t *testing.T) {
		core, logs := observer.New(zap.WarnLevel)
		c := with(func(c *Config) { c.Queues = []int{1}; c.Logger = zap.New(core) })
		c.Interface = v.A.Name
		p := openIn(t, pair.A, c)
		if in := p.Info(); in.RxQueues != 2 {
			t.Fatalf("Info.RxQueues %d on a 2-queue veth", in.RxQueues)
		}
		warn := logs.FilterMessageSnippet("steer the UDP port").All()
		if len(warn) != 1 || !strings.Contains(fmt.Sprint(warn[0].ContextMap()["hint"]), "dst-port 9797 action 1") {
			t.Fatalf("warnings %+v", warn)
		}
	})
}

package afxdp

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/ndpstack/ndpstack/internal/testbed"
)

// TestSteeringClassifier runs the steering program on hand-made frames with
// BPF_PROG_TEST_RUN. The XSKMAP is empty and the miss action is XDP_DROP,
// so DROP means "sent to the socket" and PASS means "left to the kernel".
func TestSteeringClassifier(t *testing.T) {
	testbed.RequireRoot(t)
	const port = 6420
	const xdpDrop = 1
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer xsks.Close()
	insns := steeringInstructions(port, xdpDrop, false)
	for i := range insns {
		if insns[i].Reference() == "xsks" {
			if err := insns[i].AssociateMap(xsks); err != nil {
				t.Fatal(err)
			}
		}
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "Dual BSD/GPL", Instructions: insns})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()

	udp := func(dst uint16) []byte {
		f := testbed.UDPFrame{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
			SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), SrcPort: 5000, DstPort: dst}
		b := make([]byte, 128)
		return b[:f.Build(b, []byte("payload-payload"))]
	}
	mod := func(b []byte, f func(b []byte)) []byte { f(b); return b }
	cases := []struct {
		name   string
		frame  []byte
		socket bool
	}{
		{"ndp port", udp(port), true},
		{"other udp port", udp(port + 1), false},
		{"arp", mod(udp(port), func(b []byte) { binary.BigEndian.PutUint16(b[12:], 0x0806) }), false},
		{"ipv6", mod(udp(port), func(b []byte) { binary.BigEndian.PutUint16(b[12:], 0x86dd) }), false},
		{"vlan tagged", mod(udp(port), func(b []byte) { binary.BigEndian.PutUint16(b[12:], 0x8100) }), false},
		{"tcp", mod(udp(port), func(b []byte) { b[23] = 6 }), false},
		{"icmp", mod(udp(port), func(b []byte) { b[23] = 1 }), false},
		{"ip options", mod(udp(port), func(b []byte) { b[14] = 0x46 }), false},
		{"more fragments", mod(udp(port), func(b []byte) { b[20] |= 0x20 }), false},
		{"fragment offset", mod(udp(port), func(b []byte) { b[21] = 1 }), false},
		{"DF set is fine", mod(udp(port), func(b []byte) { b[20] = 0x40 }), true},
		{"truncated", udp(port)[:41], false},
		{"exactly headers", udp(port)[:42], true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.frame
			if len(data) < 14 {
				t.Fatal("bad test frame")
			}
			ret, err := prog.Run(&ebpf.RunOptions{Data: data})
			if err != nil {
				t.Fatal(err)
			}
			want := uint32(xdpPass)
			if tc.socket {
				want = xdpDrop
			}
			if ret != want {
				t.Fatalf("action %d, want %d (socket=%v)", ret, want, tc.socket)
			}
		})
	}
}

// TestSteerAllClassifier: with SteerAll every frame goes to the socket.
func TestSteerAllClassifier(t *testing.T) {
	testbed.RequireRoot(t)
	const xdpDrop = 1
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer xsks.Close()
	insns := steeringInstructions(0, xdpDrop, true)
	for i := range insns {
		if insns[i].Reference() == "xsks" {
			if err := insns[i].AssociateMap(xsks); err != nil {
				t.Fatal(err)
			}
		}
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "Dual BSD/GPL", Instructions: insns})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	for _, typ := range []uint16{0x0800, 0x0806, 0x86dd} {
		frame := make([]byte, 60)
		binary.BigEndian.PutUint16(frame[12:], typ)
		frame[23] = 6 // TCP, for the IPv4 one
		ret, err := prog.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		if ret != xdpDrop {
			t.Fatalf("ethertype %#x: action %d, want the socket", typ, ret)
		}
	}
}

// TestNativeAttachAboveMTULimit: veth refuses a native XDP program without
// multi-buffer support above MTU 3506; the error is ErrAttachMode with a
// hint that names the MTU, not a bare ERANGE.
func TestNativeAttachAboveMTULimit(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{MTU: 3600})
	if err != nil {
		t.Fatal(err)
	}
	err = pair.A.Do(func() error {
		p, err := Open(Config{Interface: pair.Veth.A.Name, UDPPort: testPort, FrameSize: 4096, Attach: AttachNative})
		if err == nil {
			p.Close()
		}
		return err
	})
	var se *SyscallError
	if !errors.Is(err, ErrAttachMode) || !errors.As(err, &se) || !strings.Contains(se.Hint, "MTU") {
		t.Fatalf("native attach at MTU 3600: %v, want ErrAttachMode with an MTU hint", err)
	}
}

package ndplayer

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/ndpstack/ndpstack/ndp"
)

func frames(t *testing.T) [][]byte {
	var out [][]byte
	mk := func(h ndp.Header, payload []byte, trim bool) {
		f := ndp.Frame{
			SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
			SrcIP: [4]byte{10, 0, 0, 1}, DstIP: [4]byte{10, 0, 0, 2},
			SrcPort: 0xC123, DstPort: ndp.DefaultPort, Header: h, Payload: payload,
		}
		b := make([]byte, ndp.MaxFrameLen(9000))
		n, err := ndp.BuildFrame(b, &f)
		if err != nil {
			t.Fatal(err)
		}
		if trim {
			if n, err = ndp.TrimFrame(b[:n]); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, b[:n])
	}
	payload := bytes.Repeat([]byte("ndp!"), 300)
	mk(ndp.Header{Type: ndp.TypeData, Flags: ndp.FlagSYN, SrcPort: 5000, DstPort: 80, ConnID: 7, Seq: 100, Offset: 0, FlowSize: 4096, DeadlineUS: 500}, payload, false)
	mk(ndp.Header{Type: ndp.TypeData, Flags: ndp.FlagLast, SrcPort: 5000, DstPort: 80, ConnID: 7, Seq: 101, Offset: 1200}, payload[:999], false)
	mk(ndp.Header{Type: ndp.TypeData, SrcPort: 5000, DstPort: 80, ConnID: 7, Seq: 102, Offset: 2199}, payload, true)
	mk(ndp.Header{Type: ndp.TypeAck, SrcPort: 80, DstPort: 5000, ConnID: 7, Seq: 100, PathID: 3}, nil, false)
	mk(ndp.Header{Type: ndp.TypePull, SrcPort: 80, DstPort: 5000, ConnID: 7, PullCounter: 9}, nil, false)
	mk(ndp.Header{Type: ndp.TypeReset, SrcPort: 80, DstPort: 5000, ConnID: 7, Code: ndp.ResetRefused}, nil, false)
	mk(ndp.Header{Type: ndp.TypeData, SrcPort: 5000, DstPort: 80, ConnID: 8, Seq: 1}, bytes.Repeat([]byte{0xee}, ndp.MaxPayload(9000)), false)
	return out
}

// TestGopacketDecodes decodes our frames through gopacket and checks every
// layer, then re-serialises them with gopacket computing lengths and
// checksums itself: the bytes must equal ours (an independent check of our
// IPv4 and UDP checksums).
func TestGopacketDecodes(t *testing.T) {
	for i, fr := range frames(t) {
		pkt := gopacket.NewPacket(fr, layers.LayerTypeEthernet, gopacket.Default)
		if el := pkt.ErrorLayer(); el != nil {
			t.Fatalf("frame %d: decode error %v", i, el.Error())
		}
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		nl, _ := pkt.Layer(LayerTypeNDP).(*NDP)
		eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		if ip == nil || udp == nil || nl == nil || eth == nil {
			t.Fatalf("frame %d: layers %v", i, pkt.Layers())
		}
		var want ndp.Frame
		if err := ndp.ParseFrame(fr, &want); err != nil {
			t.Fatal(err)
		}
		if nl.Header != want.Header || !bytes.Equal(nl.LayerPayload(), want.Payload) {
			t.Fatalf("frame %d: header %+v want %+v", i, nl.Header, want.Header)
		}
		if udp.DstPort != layers.UDPPort(ndp.DefaultPort) || ip.Protocol != layers.IPProtocolUDP {
			t.Fatalf("frame %d: udp %v ip %v", i, udp.DstPort, ip.Protocol)
		}
		// independent checksum check: let gopacket compute them
		buf := gopacket.NewSerializeBuffer()
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		ipc, udpc := *ip, *udp
		ipc.Checksum, udpc.Checksum = 0, 0
		err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: false},
			eth, &ipc, &udpc, nl, gopacket.Payload(nl.LayerPayload()))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), fr) {
			t.Fatalf("frame %d: gopacket re-serialisation differs (checksums?)\n got %x\nwant %x", i, buf.Bytes()[:90], fr[:90])
		}
	}
}

func TestRegisterPort(t *testing.T) {
	RegisterPort(7777)
	f := frames(t)[3]
	// rewrite the UDP dst port to 7777 via a fresh build
	var fr ndp.Frame
	if err := ndp.ParseFrame(f, &fr); err != nil {
		t.Fatal(err)
	}
	fr.DstPort = 7777
	b := make([]byte, 200)
	n, err := ndp.BuildFrame(b, &fr)
	if err != nil {
		t.Fatal(err)
	}
	pkt := gopacket.NewPacket(b[:n], layers.LayerTypeEthernet, gopacket.Default)
	if pkt.Layer(LayerTypeNDP) == nil {
		t.Fatalf("port 7777 not decoded as NDP: %v", pkt.Layers())
	}
}

// TestPcapRoundTrip writes a pcap with pcapgo, reads it back with gopacket
// and, when tshark is available, has Wireshark's dissectors verify the
// IPv4 and UDP checksums.
func TestPcapRoundTrip(t *testing.T) {
	frs := frames(t)
	path := filepath.Join(t.TempDir(), "ndp.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 0)
	for i, fr := range frs {
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(fr), Length: len(fr)}
		if err := w.WritePacket(ci, fr); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	rf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	r, err := pcapgo.NewReader(rf)
	if err != nil {
		t.Fatal(err)
	}
	src := gopacket.NewPacketSource(r, r.LinkType())
	got := 0
	for pkt := range src.Packets() {
		nl, _ := pkt.Layer(LayerTypeNDP).(*NDP)
		if nl == nil {
			t.Fatalf("packet %d: no NDP layer: %v", got, pkt.Layers())
		}
		if !bytes.Equal(pkt.Data(), frs[got]) {
			t.Fatalf("packet %d differs after pcap round trip", got)
		}
		got++
	}
	if got != len(frs) {
		t.Fatalf("read %d packets, wrote %d", got, len(frs))
	}

	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("NDP_REQUIRE_NETNS") != "" {
			t.Fatal("tshark not on PATH but NDP_REQUIRE_NETNS is set (CI must install tshark)")
		}
		t.Skip("tshark not on PATH: skipping Wireshark checksum verification (gopacket checks passed)")
	}
	out, err := exec.Command(tshark, "-r", path, "-V",
		"-o", "udp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE").CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	s := string(out)
	if strings.Count(s, "Internet Protocol Version 4") != len(frs) || strings.Count(s, "User Datagram Protocol") != len(frs) {
		t.Fatalf("tshark did not dissect every frame as IPv4/UDP:\n%s", s)
	}
	if strings.Contains(s, "Bad") || strings.Contains(s, "[incorrect") || strings.Contains(s, "Malformed") {
		t.Fatalf("tshark reports bad checksums or malformed frames:\n%s", s)
	}
	if strings.Count(strings.ToLower(s), "checksum status: good") < 2*len(frs) || strings.Count(s, "[correct]") < 2*len(frs) {
		t.Fatalf("tshark did not verify IPv4 and UDP checksums of every frame:\n%s", s)
	}
}

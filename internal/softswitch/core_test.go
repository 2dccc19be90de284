package softswitch

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// ethFrame is an Ethernet frame from src to dst of n bytes (IPv4, TCP, DSCP
// dscp, ECT(0)).
func ethFrame(dst, src byte, n int, dscp uint8) []byte {
	f := make([]byte, n)
	copy(f, []byte{2, 0, 0, 0, 0, dst})
	copy(f[6:], []byte{2, 0, 0, 0, 0, src})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	f[14], f[15], f[23] = 0x45, dscp<<2|2, 6
	binary.BigEndian.PutUint16(f[16:], uint16(n-14))
	binary.BigEndian.PutUint16(f[24:], ^ipSum(f))
	return f
}

// ipSum is the folded ones' complement sum of f's IPv4 header.
func ipSum(f []byte) uint16 {
	var sum uint32
	for i := 14; i < 34; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(f[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

func newTestCore(t *testing.T, cfg Config) *core {
	t.Helper()
	cfg.Ports = []string{"p0", "p1", "p2"}
	cfg.populate()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	c, err := newCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// drain departs everything port p sends by now and gives the buffers back.
func drain(c *core, p int, now ndp.Time) [][]byte {
	out := c.depart(p, now, nil)
	res := make([][]byte, len(out))
	for i, f := range out {
		res[i] = append([]byte(nil), f...)
		c.put(f)
	}
	return res
}

// TestCoreForwarding: unknown and broadcast destinations flood, learned ones
// go to their port only, a frame back out its own port is dropped, runts are
// counted, and every buffer comes back.
func TestCoreForwarding(t *testing.T) {
	c := newTestCore(t, Config{Rate: 1e9})
	free := len(c.free)
	c.ingress(0, ethFrame(9, 1, 100, 0), 0) // unknown: flood to 1 and 2
	if c.st.Flooded != 1 || c.ports[1].other.len() != 1 || c.ports[2].other.len() != 1 {
		t.Fatalf("flood: %+v", c.st)
	}
	c.ingress(1, ethFrame(1, 2, 100, 0), 0) // to the learned host 1: port 0 only
	if c.ports[0].other.len() != 1 || c.ports[2].other.len() != 1 {
		t.Fatal("learned destination not forwarded to its port only")
	}
	c.ingress(0, ethFrame(1, 3, 100, 0), 0) // host 1 lives on port 0
	if c.st.Hairpin != 1 {
		t.Fatalf("hairpin: %+v", c.st)
	}
	c.ingress(0, make([]byte, 10), 0)
	if c.st.Malformed != 1 {
		t.Fatalf("runt: %+v", c.st)
	}
	for p := range c.ports {
		drain(c, p, ndp.Time(time.Second))
	}
	if len(c.free) != free {
		t.Fatalf("%d of %d buffers back", len(c.free), free)
	}
}

// TestCoreRate: a backlogged port sends at the emulated rate: 10 frames of
// 1250 bytes at 1 Gb/s take 100 µs, and only the frames due by now (plus the
// horizon) leave; the drop-tail queue drops past its depth and marks ECN CE
// from OtherECN on.
func TestCoreRate(t *testing.T) {
	c := newTestCore(t, Config{Rate: 1e9, Horizon: time.Nanosecond, OtherQueue: 10, OtherECN: 5})
	c.ingress(1, ethFrame(1, 2, 100, 0), 0) // learn host 2 on port 1
	drain(c, 0, 0)
	for i := 0; i < 12; i++ {
		c.ingress(0, ethFrame(2, 1, 1250, 0), 1000)
	}
	o := c.ports[1].st
	// The first frame is on the wire when the second arrives: ten wait, one is dropped.
	if o.OtherDrops != 1 || o.OtherMarks != 5 {
		t.Fatalf("drops %d marks %d, want 1 and 5", o.OtherDrops, o.OtherMarks)
	}
	if got := len(drain(c, 1, 1000)); got != 1 {
		t.Fatalf("%d frames at once, want 1", got)
	}
	if got := len(drain(c, 1, 1000+35_000)); got != 3 { // 10 µs each: due at 10, 20, 30 µs
		t.Fatalf("%d frames by 35 µs, want 3", got)
	}
	if got := len(drain(c, 1, 1000+120_000)); got != 7 {
		t.Fatalf("%d frames by 120 µs, want the other 7", got)
	}
}

// TestCommodityTrim: past the data queue, a DataDSCP frame is cut to TrimSize,
// gets TrimDSCP with a valid IPv4 checksum, and leaves before queued data. The
// first of four frames arriving at once is already on the wire when the others
// arrive; two wait in the data queue and the fourth is trimmed.
func TestCommodityTrim(t *testing.T) {
	c := newTestCore(t, Config{Rate: 1e9, Personality: TrimCommodity, Fabric: fabricCfg(2)})
	c.ingress(1, ethFrame(1, 2, 100, 0), 0)
	drain(c, 0, 0)
	for i := 0; i < 4; i++ {
		c.ingress(0, ethFrame(2, 1, 1000, 10), 0)
	}
	out := drain(c, 1, ndp.Time(time.Second))
	if len(out) != 4 || len(out[0]) != 1000 || len(out[1]) != 128 || len(out[2]) != 1000 || len(out[3]) != 1000 {
		t.Fatalf("departures %d, lengths %d %d", len(out), len(out[0]), len(out[1]))
	}
	tr := out[1]
	if tr[15]>>2 != 46 || tr[15]&3 != 2 || binary.BigEndian.Uint16(tr[16:]) != 986 {
		t.Fatalf("trimmed frame: tos %#x, total length %d", tr[15], binary.BigEndian.Uint16(tr[16:]))
	}
	if ipSum(tr) != 0xffff {
		t.Fatal("trimmed frame's IPv4 checksum is wrong")
	}
}

func fabricCfg(dataQueue int) fabric.Config { return fabric.Config{DataQueue: dataQueue} }

// TestCoreLeafSpine: two leaves of two ports, two spines. A broadcast reaches
// every other host once (through spine 0 to the far leaf); frames to a host on
// the other leaf spread over both spines by their TCP source port (XOR16 of
// the 5-tuple), reach the right port only, and a slower spine link delivers
// later; every buffer comes back.
func TestCoreLeafSpine(t *testing.T) {
	cfg := Config{Rate: 1e9, Spines: 2, Leaf: []int{0, 0, 1, 1}, Horizon: time.Nanosecond,
		LinkRates: []LinkRate{{Leaf: 1, Spine: 1, Down: 1e8}}}
	cfg.Ports = []string{"p0", "p1", "p2", "p3"}
	cfg.populate()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	c, err := newCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	free := len(c.free)
	end := ndp.Time(time.Second)
	got := func() [4]int {
		c.carry(end)
		var n [4]int
		for p := 0; p < 4; p++ {
			n[p] = len(drain(c, p, end))
		}
		return n
	}
	bcast := ethFrame(0, 1, 100, 0)
	copy(bcast, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	c.ingress(0, bcast, 0)
	if n := got(); n != [4]int{0, 1, 1, 1} {
		t.Fatalf("broadcast from port 0 reached ports %v, want each other port once", n)
	}
	for p := 1; p < 4; p++ { // learn hosts 2, 3, 4 on ports 1, 2, 3
		c.ingress(p, ethFrame(1, byte(p+1), 100, 0), 0)
	}
	got()
	before := map[string]uint64{}
	for _, o := range c.ports {
		before[o.name] = o.st.TxFrames
	}
	for sport := 0; sport < 8; sport++ {
		f := ethFrame(3, 1, 1000, 0) // host 1 (port 0) to host 3 (port 2)
		binary.BigEndian.PutUint16(f[34:], uint16(0xc000+sport))
		binary.BigEndian.PutUint16(f[36:], 80)
		c.ingress(0, f, end)
	}
	t1 := end + ndp.Time(50*time.Microsecond)
	c.carry(t1) // the fast spine's frames are through, the slow one's are not
	if n := len(drain(c, 2, t1)); n != 4 {
		t.Fatalf("%d frames through the fast spine by 50 µs, want 4", n)
	}
	end += ndp.Time(time.Second)
	if n := got(); n != [4]int{0, 0, 4, 0} {
		t.Fatalf("frames to port 2 left by ports %v", n)
	}
	for _, l := range []string{"leaf0>spine0", "leaf0>spine1", "spine0>leaf1", "spine1>leaf1"} {
		for _, o := range c.ports {
			if o.name == l && o.st.TxFrames-before[l] != 4 {
				t.Errorf("%s carried %d of 8 frames, want 4", l, o.st.TxFrames-before[l])
			}
		}
	}
	if len(c.free) != free {
		t.Fatalf("%d of %d buffers back", len(c.free), free)
	}
}

// TestCoreHostQueue: with host NIC links a burst from one host enters the
// switch at the link rate through a HostQueue-frame queue (the rest dropped
// and counted on the NIC port), and the output port sends what arrived.
func TestCoreHostQueue(t *testing.T) {
	c := newTestCore(t, Config{Rate: 1e9, HostQueue: 4, Horizon: time.Nanosecond})
	free := len(c.free)
	c.ingress(1, ethFrame(1, 2, 100, 0), 0) // learn host 2 on port 1
	c.carry(ndp.Time(time.Millisecond))
	drain(c, 0, ndp.Time(time.Millisecond)) // the flooded copies
	drain(c, 2, ndp.Time(time.Millisecond))
	now := ndp.Time(time.Millisecond)
	for i := 0; i < 6; i++ {
		c.ingress(0, ethFrame(2, 1, 1250, 0), now) // 10 µs each at 1 Gb/s
	}
	nic := c.ports[c.nic[0]]
	if nic.st.OtherDrops != 2 || !nic.fifo {
		t.Fatalf("NIC queue: %+v", nic.st)
	}
	c.carry(now + 25_000) // two frames' transmissions have ended by 25 µs
	if got := len(drain(c, 1, now+25_000)); got != 2 {
		t.Fatalf("%d frames through the NIC link by 25 µs, want 2", got)
	}
	c.carry(now + ndp.Time(time.Millisecond))
	if got := len(drain(c, 1, now+ndp.Time(time.Millisecond))); got != 2 {
		t.Fatalf("%d more frames, want the other 2", got)
	}
	var st Stats
	c.stats(&st)
	if !st.Ports[c.nic[0]].NIC || st.Ports[c.nic[0]].OtherDrops != 2 {
		t.Fatalf("NIC port stats %+v", st.Ports[c.nic[0]])
	}
	if len(c.free) != free {
		t.Fatalf("%d of %d buffers back", len(c.free), free)
	}
}

// TestCoreHostNICControlFirst: a host's NIC link sends the NDP control
// frames its stack handed it (a PULL here) before the data frames queued
// ahead of them (but after the one on the wire), as the stack's own order (control first) and the
// simulator's NIC do; the data keeps its order, and the commodity
// personality picks control frames by DSCP.
func TestCoreHostNICControlFirst(t *testing.T) {
	for _, pers := range []Personality{TrimNDP, TrimCommodity} {
		c := newTestCore(t, Config{Rate: 1e9, HostQueue: 16, Horizon: time.Nanosecond, Personality: pers})
		free := len(c.free)
		c.ingress(1, ethFrame(1, 2, 100, 0), 0) // learn host 2 on port 1
		c.carry(ndp.Time(time.Millisecond))
		drain(c, 0, ndp.Time(time.Millisecond))
		drain(c, 2, ndp.Time(time.Millisecond))
		now := ndp.Time(time.Millisecond)
		mk := func(typ ndp.PacketType, seq uint32, payload int, dscp uint8) []byte {
			f := ndp.Frame{SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2}, SrcIP: [4]byte{10, 0, 0, 1}, DstIP: [4]byte{10, 0, 0, 2},
				SrcPort: 40000, DstPort: ndp.DefaultPort, Header: ndp.Header{Type: typ, SrcPort: 1, DstPort: 2, ConnID: 7, Seq: seq}, Payload: make([]byte, payload)}
			b := make([]byte, ndp.HeaderOverhead+payload)
			n, err := ndp.BuildFrame(b, &f)
			if err != nil {
				t.Fatal(err)
			}
			setDSCP(b, dscp) // as a stack with the commodity DSCPs configured marks it
			return b[:n]
		}
		cc := c.cfg.Commodity
		dataDSCP, ctlDSCP := uint8(0), uint8(0)
		if pers == TrimCommodity {
			dataDSCP, ctlDSCP = cc.DataDSCP, cc.ControlDSCP
		}
		for i := range 4 {
			c.ingress(0, mk(ndp.TypeData, uint32(i), 1160, dataDSCP), now) // 10 µs each at 1 Gb/s
		}
		c.carry(now + 15_000) // data 0 sent, data 1 on the wire
		c.ingress(0, mk(ndp.TypePull, 99, 0, ctlDSCP), now+15_000)
		c.carry(now + ndp.Time(time.Millisecond))
		out := drain(c, 1, now+ndp.Time(time.Millisecond))
		if len(out) != 5 {
			t.Fatalf("%v: %d frames through, want 5", pers, len(out))
		}
		want := []uint32{0, 1, 99, 2, 3}
		for i, b := range out {
			var f ndp.Frame
			if err := ndp.ParseFrame(b, &f); err != nil {
				t.Fatalf("%v: frame %d: %v", pers, i, err)
			}
			if f.Header.Seq != want[i] {
				t.Fatalf("%v: frame %d is seq %d, want order %v", pers, i, f.Header.Seq, want)
			}
		}
		if len(c.free) != free {
			t.Fatalf("%v: %d of %d buffers back", pers, len(c.free), free)
		}
	}
}

// TestCoreLatePassKeepsQueueShort: a pass that runs late moves a host NIC's
// backlog into the switch at the emulated times its transmissions ended; the
// output port, as fast as the NIC, sends each frame before the next arrives, so
// its NDP data queue stays short and nothing is trimmed, however late the pass.
func TestCoreLatePassKeepsQueueShort(t *testing.T) {
	c := newTestCore(t, Config{Rate: 1e9, HostQueue: 16, Horizon: time.Nanosecond, Fabric: fabricCfg(8)})
	c.ingress(1, ethFrame(1, 2, 100, 0), 0) // learn host 2 on port 1
	c.carry(ndp.Time(time.Millisecond))
	drain(c, 0, ndp.Time(time.Millisecond))
	drain(c, 2, ndp.Time(time.Millisecond))
	now := ndp.Time(time.Millisecond)
	for i := 0; i < 12; i++ {
		f := ethFrame(2, 1, 1250, 0) // 10 µs each at 1 Gb/s
		f[23] = 17                   // UDP to the NDP port
		binary.BigEndian.PutUint16(f[36:], ndp.DefaultPort)
		c.ingress(0, f, now)
	}
	late := now + 150_000 // every NIC transmission has ended
	c.carry(late)
	if got := len(drain(c, 1, late)); got != 12 {
		t.Fatalf("%d frames departed by 150 µs, want 12", got)
	}
	var st Stats
	c.stats(&st)
	if p := st.Ports[1].NDP; p.MaxDataDepth > 1 || p.Trimmed != 0 {
		t.Fatalf("port 1 after a late pass: deepest data queue %d, trimmed %d; want <= 1 and 0", p.MaxDataDepth, p.Trimmed)
	}
}

// TestCoreLatePassInterleavesLinks: a pass that runs late moves two host NICs'
// backlogs into the switch in emulated-time order across both links. Host 2
// sends eight frames to host 3, host 1 eight more once host 2's have left; the
// late pass must not hand host 1's NIC's frames on first because its link
// comes first in the switch: host 3's port would then find host 2's earlier
// frames queued behind host 1's, hold more than its 8 and trim.
func TestCoreLatePassInterleavesLinks(t *testing.T) {
	c := newTestCore(t, Config{Rate: 1e9, HostQueue: 16, Horizon: time.Nanosecond, Fabric: fabricCfg(8)})
	c.ingress(1, ethFrame(1, 2, 100, 0), 0) // learn host 2 on port 1
	c.ingress(2, ethFrame(1, 3, 100, 0), 0) // and host 3 on port 2
	start := ndp.Time(time.Millisecond)
	c.carry(start)
	for p := 0; p < 3; p++ {
		drain(c, p, start)
	}
	ndpFrame := func(dst, src byte) []byte {
		f := ethFrame(dst, src, 1250, 0) // 10 µs each at 1 Gb/s
		f[23] = 17                       // UDP to the NDP port
		binary.BigEndian.PutUint16(f[36:], ndp.DefaultPort)
		return f
	}
	for i := 0; i < 8; i++ {
		c.ingress(1, ndpFrame(3, 2), start)
	}
	for i := 0; i < 8; i++ {
		c.ingress(0, ndpFrame(3, 1), start+90_000) // after host 2's have crossed its NIC
	}
	late := start + 400_000
	c.carry(late)
	if got := len(drain(c, 2, late)); got != 16 {
		t.Fatalf("%d frames departed by 400 µs, want 16", got)
	}
	var st Stats
	c.stats(&st)
	if p := st.Ports[2].NDP; p.MaxDataDepth > 1 || p.Trimmed != 0 {
		t.Fatalf("port 2 after a late pass: deepest data queue %d, trimmed %d; want <= 1 and 0", p.MaxDataDepth, p.Trimmed)
	}
}

// TestCoreCatchUpBound: a pass later than CatchUp moves a backlogged link's
// clock to CatchUp before the pass, and counts the link time skipped.
func TestCoreCatchUpBound(t *testing.T) {
	c := newTestCore(t, Config{Rate: 1e9, HostQueue: 16, Horizon: time.Nanosecond, CatchUp: 10 * time.Microsecond})
	c.ingress(1, ethFrame(1, 2, 100, 0), 0) // learn host 2 on port 1
	start := ndp.Time(time.Millisecond)
	c.carry(start)
	drain(c, 0, start)
	drain(c, 1, start)
	drain(c, 2, start)
	for i := 0; i < 12; i++ {
		c.ingress(0, ethFrame(2, 1, 1250, 0), start) // 10 µs each at 1 Gb/s
	}
	late := start + 150_000
	c.carry(late)
	// The NIC link restarts at 140 µs: one transmission ended by 150 µs.
	if got := len(drain(c, 1, late)); got != 1 {
		t.Fatalf("%d frames through by 150 µs, want 1", got)
	}
	if lost := c.ports[c.nic[0]].st.LostNs; lost != 140_000 {
		t.Fatalf("NIC link lost %d ns, want 140000", lost)
	}
}

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
	if o.OtherDrops != 2 || o.OtherMarks != 5 {
		t.Fatalf("drops %d marks %d, want 2 and 5", o.OtherDrops, o.OtherMarks)
	}
	if got := len(drain(c, 1, 1000)); got != 1 {
		t.Fatalf("%d frames at once, want 1", got)
	}
	if got := len(drain(c, 1, 1000+35_000)); got != 3 { // 10 µs each: due at 10, 20, 30 µs
		t.Fatalf("%d frames by 35 µs, want 3", got)
	}
	if got := len(drain(c, 1, 1000+100_000)); got != 6 {
		t.Fatalf("%d frames by 100 µs, want the other 6", got)
	}
}

// TestCommodityTrim: past the data queue, a DataDSCP frame is cut to TrimSize,
// gets TrimDSCP with a valid IPv4 checksum, and leaves before queued data.
func TestCommodityTrim(t *testing.T) {
	c := newTestCore(t, Config{Rate: 1e9, Personality: TrimCommodity, Fabric: fabricCfg(2)})
	c.ingress(1, ethFrame(1, 2, 100, 0), 0)
	drain(c, 0, 0)
	for i := 0; i < 3; i++ {
		c.ingress(0, ethFrame(2, 1, 1000, 10), 0)
	}
	out := drain(c, 1, ndp.Time(time.Second))
	if len(out) != 3 || len(out[0]) != 128 || len(out[1]) != 1000 || len(out[2]) != 1000 {
		t.Fatalf("departures %d, lengths %d %d", len(out), len(out[0]), len(out[1]))
	}
	tr := out[0]
	if tr[15]>>2 != 46 || tr[15]&3 != 2 || binary.BigEndian.Uint16(tr[16:]) != 986 {
		t.Fatalf("trimmed frame: tos %#x, total length %d", tr[15], binary.BigEndian.Uint16(tr[16:]))
	}
	if ipSum(tr) != 0xffff {
		t.Fatal("trimmed frame's IPv4 checksum is wrong")
	}
}

func fabricCfg(dataQueue int) fabric.Config { return fabric.Config{DataQueue: dataQueue} }

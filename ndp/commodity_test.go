package ndp

import (
	"bytes"
	"encoding/binary"
	"testing"
)

var testCommodity = CommodityTrim{DataDSCP: 10, ControlDSCP: 46, TrimDSCPs: []uint8{46, 48}}

// commodityCut cuts a built DATA frame as a commodity switch does: to size
// bytes, DSCP rewritten to dscp, with the IPv4 checksum fixed or not and the
// IPv4/UDP lengths fixed or not.
func commodityCut(b []byte, size int, dscp uint8, fixCsum, fixLen bool) []byte {
	c := append([]byte(nil), b[:size]...)
	ip := c[offIP:]
	ip[1] = dscp<<2 | ip[1]&3
	if fixLen {
		binary.BigEndian.PutUint16(ip[2:], uint16(size-offIP))
		binary.BigEndian.PutUint16(c[offUDP+4:], uint16(size-offUDP))
	}
	if fixCsum {
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ipv4HeaderChecksum(ip[:ipv4HeaderLen]))
	}
	return c
}

// TestCommodityTrimmed: a DATA frame cut by a commodity switch (trim DSCP,
// shorter than its lengths say, checksums and lengths fixed or not) parses as
// a trimmed header with the original payload length; the same cut without a
// trim DSCP, or with commodity trimming off, is malformed; an uncut frame with a
// trim DSCP parses as ordinary DATA.
func TestCommodityTrimmed(t *testing.T) {
	f := testFrame(bytes.Repeat([]byte{7}, 1000))
	f.Header = Header{Type: TypeData, Flags: FlagLast, SrcPort: 1, DstPort: 80, ConnID: 9, Seq: 42, Offset: 4096, PathID: 3}
	b := make([]byte, HeaderOverhead+1000)
	n, err := BuildFrame(b, &f)
	if err != nil {
		t.Fatal(err)
	}
	b = b[:n]
	setDSCP(b, testCommodity.DataDSCP)
	var orig Frame
	if err := ParseFrameCommodity(b, &orig, &testCommodity); err != nil || orig.Header.Flags&FlagTrimmed != 0 {
		t.Fatalf("uncut frame: %v %+v", err, orig.Header)
	}
	for _, size := range []int{HeaderOverhead, 128, 600} {
		for _, dscp := range []uint8{46, 48} {
			for _, fixCsum := range []bool{false, true} {
				for _, fixLen := range []bool{false, true} {
					if fixLen && !fixCsum {
						continue // a switch that rewrites lengths fixes the checksum
					}
					c := commodityCut(b, size, dscp, fixCsum, fixLen)
					var g Frame
					if err := ParseFrameCommodity(c, &g, &testCommodity); err != nil {
						t.Fatalf("size %d dscp %d fixCsum %v fixLen %v: %v", size, dscp, fixCsum, fixLen, err)
					}
					want := orig.Header
					want.Flags |= FlagTrimmed
					if g.Header != want || len(g.Payload) != 0 || g.SrcIP != orig.SrcIP || g.DstPort != orig.DstPort {
						t.Fatalf("size %d: header %+v, want %+v (payload %d bytes)", size, g.Header, want, len(g.Payload))
					}
					if err := ParseFrame(c, &g); err == nil {
						t.Fatalf("size %d: commodity-trimmed frame parses without CommodityTrim", size)
					}
				}
			}
		}
		var g Frame
		if err := ParseFrameCommodity(commodityCut(b, size, 12, true, true), &g, &testCommodity); err == nil {
			t.Fatalf("size %d: cut frame without a trim DSCP accepted", size)
		}
	}
	// A header cut short of HeaderOverhead, or a bad IPv4 checksum, is refused.
	var g Frame
	if err := ParseFrameCommodity(commodityCut(b, HeaderOverhead-1, 46, true, false), &g, &testCommodity); err == nil {
		t.Fatal("frame cut inside the NDP header accepted")
	}
	bad := commodityCut(b, 128, 46, true, false)
	bad[offIP+8]-- // TTL: neither checksum matches
	if err := ParseFrameCommodity(bad, &g, &testCommodity); err == nil {
		t.Fatal("frame with a bad IPv4 checksum accepted")
	}
	if allocs := testing.AllocsPerRun(100, func() { ParseFrameCommodity(bad[:128], &g, &testCommodity) }); allocs != 0 {
		t.Fatalf("%v allocations per parse", allocs)
	}
}

// TestCommodityEndpoint: an endpoint with CommodityTrim marks DATA with
// DataDSCP and control frames with ControlDSCP, and answers a commodity-trimmed
// DATA frame with a NACK exactly as it answers a flagged trimmed header.
func TestCommodityEndpoint(t *testing.T) {
	for _, commodity := range []bool{false, true} {
		nacks := func(cut func(b []byte) []byte) (uint64, uint64) {
			cfgA, cfgB := Config{LocalIP: [4]byte{10, 0, 0, 1}, Seed: 1}, Config{LocalIP: [4]byte{10, 0, 0, 2}, Seed: 2}
			if commodity {
				cfgA.Commodity, cfgB.Commodity = testCommodity, testCommodity
			}
			a, err := NewEndpoint(cfgA)
			if err != nil {
				t.Fatal(err)
			}
			bEp, err := NewEndpoint(cfgB)
			if err != nil {
				t.Fatal(err)
			}
			if err := bEp.Listen(80); err != nil {
				t.Fatal(err)
			}
			id, err := a.Dial(Addr{IP: cfgB.LocalIP, Port: 80}, DialOptions{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Write(id, bytes.Repeat([]byte{1}, 4000), 0); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 2048)
			for {
				n, _ := a.PollFrame(buf, 0, true)
				if n == 0 {
					break
				}
				fr := buf[:n]
				if commodity {
					want := testCommodity.ControlDSCP
					if n > HeaderOverhead {
						want = testCommodity.DataDSCP
					}
					if fr[offIP+1]>>2 != want {
						t.Fatalf("frame of %d bytes has DSCP %d, want %d", n, fr[offIP+1]>>2, want)
					}
				}
				if err := bEp.HandleFrame(cut(fr), 0); err != nil {
					t.Fatalf("commodity %v: %v", commodity, err)
				}
			}
			for {
				if n, _ := bEp.PollFrame(buf, 0, true); n == 0 {
					break
				}
			}
			return bEp.Stats().NacksOut, bEp.Stats().TrimmedIn
		}
		flaggedN, flaggedT := nacks(func(b []byte) []byte { n, _ := TrimFrame(b); return b[:n] })
		if !commodity {
			continue
		}
		cutN, cutT := nacks(func(b []byte) []byte { return commodityCut(b, 128, 46, false, false) })
		if flaggedN == 0 || cutN != flaggedN || cutT != flaggedT {
			t.Fatalf("flagged trims: %d NACKs, %d trimmed; commodity cuts: %d NACKs, %d trimmed", flaggedN, flaggedT, cutN, cutT)
		}
	}
}

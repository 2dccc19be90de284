package softswitch

import (
	"fmt"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

// incastArrivals is an 8-to-1 incast's frames toward the client's port at
// 1 Gb/s: every server's first-RTT window (30 full DATA frames back to back,
// the servers 5 µs apart), then pulled frames one per 12.3 µs pull slot,
// servers in turn. Frames carry the commodity data DSCP, as stacks with
// CommodityTrim send them.
type arrival struct {
	at   ndp.Time
	from int // port
	f    []byte
}

func incastArrivals(t *testing.T) []arrival {
	t.Helper()
	const servers, iw, pulled = 8, 30, 480
	mk := func(srv int, seq uint32) []byte {
		fr := ndp.Frame{
			DstMAC: [6]byte{2, 0, 0, 0, 0, 1}, SrcMAC: [6]byte{2, 0, 0, 0, 0, byte(10 + srv)},
			SrcIP: [4]byte{10, 0, 0, byte(10 + srv)}, DstIP: [4]byte{10, 0, 0, 1},
			SrcPort: 0xC000 + uint16(seq%8), DstPort: 6420,
			Header:  ndp.Header{Type: ndp.TypeData, SrcPort: 7, DstPort: uint16(1000 + srv), ConnID: uint32(srv), Seq: seq},
			Payload: make([]byte, ndp.MaxPayload(1500)),
		}
		b := make([]byte, ndp.MaxFrameLen(1500))
		n, err := ndp.BuildFrame(b, &fr)
		if err != nil {
			t.Fatal(err)
		}
		setDSCP(b[:n], DefaultCommodity().DataDSCP)
		return b[:n]
	}
	var out []arrival
	for s := 0; s < servers; s++ {
		for i := 0; i < iw; i++ {
			out = append(out, arrival{at: ndp.Time(s) * 5 * ndp.Time(time.Microsecond), from: 1 + s, f: mk(s, uint32(i))})
		}
	}
	for i := 0; i < pulled; i++ {
		s := i % servers
		out = append(out, arrival{at: 300*ndp.Time(time.Microsecond) + ndp.Time(i)*12_300, from: 1 + s, f: mk(s, uint32(iw+i/servers))})
	}
	return out
}

// runIncast switches arrivals through a 9-port core of the given personality
// and returns the frames the client's port sends and the switch's counters.
func runIncast(t *testing.T, p Personality, trim fabric.TrimPolicy, arrivals []arrival) ([][]byte, Stats) {
	t.Helper()
	cfg := Config{Rate: 1e9, Personality: p, Fabric: fabric.Config{Trim: trim}, Horizon: time.Nanosecond}
	for i := 0; i < 9; i++ {
		cfg.Ports = append(cfg.Ports, fmt.Sprintf("p%d", i))
	}
	cfg.populate()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	c, err := newCore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.ingress(0, ethFrame(0xff, 1, 60, 0), 0) // the client's MAC is learned on port 0
	for p := range c.ports {
		drain(c, p, 0)
	}
	var out [][]byte
	for _, a := range arrivals {
		out = append(out, drain(c, 0, a.at)...)
		c.ingress(a.from, a.f, a.at)
	}
	out = append(out, drain(c, 0, ndp.Time(time.Second))...)
	var st Stats
	c.stats(&st)
	return out, st
}

// TestPersonalitiesTrimAlike runs the same incast arrivals through the
// NDP-aware switch (trimming the arrival or the tail at random, the paper's
// rule, or always the arrival) and the commodity switch (cut to 128 bytes,
// DSCP rewritten): a failed admission is one trim in every case, so the
// counts agree, and the receiver recognises every trimmed frame as a trimmed
// header (ndp.ParseFrameCommodity with the stacks' CommodityTrim for the
// commodity switch): as many NACKs as trims, and every other frame arrives
// whole. The counts differ only where a 128-byte header's longer
// serialisation (1.02 µs against 0.72 at 1 Gb/s) moves a later departure
// across an arrival.
func TestPersonalitiesTrimAlike(t *testing.T) {
	arrivals := incastArrivals(t)
	d := DefaultCommodity()
	ct := ndp.CommodityTrim{DataDSCP: d.DataDSCP, ControlDSCP: d.ControlDSCP, TrimDSCPs: []uint8{d.TrimDSCP}}
	type result struct {
		name           string
		trims, nacks   uint64
		whole, headers int
	}
	var res []result
	for _, tc := range []struct {
		name string
		p    Personality
		trim fabric.TrimPolicy
	}{
		{"ndp, random", TrimNDP, fabric.TrimRandom},
		{"ndp, arrival", TrimNDP, fabric.TrimArrival},
		{"commodity", TrimCommodity, fabric.TrimArrival},
	} {
		out, st := runIncast(t, tc.p, tc.trim, arrivals)
		r := result{name: tc.name, trims: st.Trimmed}
		var f ndp.Frame
		for _, b := range out {
			if err := ndp.ParseFrameCommodity(b, &f, &ct); err != nil {
				t.Fatalf("%s: the client's port sent a frame the stack rejects: %v", tc.name, err)
			}
			if f.Header.Flags&ndp.FlagTrimmed != 0 {
				r.nacks++
				r.headers += len(b)
				continue
			}
			r.whole++
		}
		if st.Bounced != 0 || st.NDPDropped != 0 {
			t.Fatalf("%s: %d bounced, %d dropped: the header queue overflowed", tc.name, st.Bounced, st.NDPDropped)
		}
		if r.nacks != r.trims || uint64(r.whole)+r.trims != uint64(len(arrivals)) {
			t.Fatalf("%s: %d trims, the receiver NACKs %d and takes %d whole of %d", tc.name, r.trims, r.nacks, r.whole, len(arrivals))
		}
		t.Logf("%-13s trims %d, NACKs %d, whole %d, header bytes %d", tc.name, r.trims, r.nacks, r.whole, r.headers)
		res = append(res, r)
	}
	for _, r := range res[1:] {
		if r.trims != res[0].trims {
			t.Errorf("%s trims %d, %s %d: the same arrivals should meet the same admissions", r.name, r.trims, res[0].name, res[0].trims)
		}
	}
}

package ndp

import (
	"bytes"
	"errors"
	"testing"
)

func testFrame(payload []byte) Frame {
	return Frame{
		SrcMAC:  [6]byte{2, 0, 0, 0, 0, 1},
		DstMAC:  [6]byte{2, 0, 0, 0, 0, 2},
		SrcIP:   [4]byte{10, 0, 0, 1},
		DstIP:   [4]byte{10, 0, 0, 2},
		SrcPort: 49152,
		DstPort: DefaultPort,
		Header: Header{
			Type: TypeData, Flags: FlagSYN | FlagLast, SrcPort: 1000, DstPort: 80,
			ConnID: 0xdeadbeef, Seq: 77, SynOffset: 3, PathID: 5, Priority: 2,
			Offset: 1 << 40, FlowSize: 12345, DeadlineUS: 999,
		},
		Payload: payload,
	}
}

func TestBuildParseRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 31, 1000, MaxPayload(1500), MaxPayload(9000)} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i*7 + 3)
		}
		f := testFrame(p)
		buf := make([]byte, MaxFrameLen(9000))
		l, err := BuildFrame(buf, &f)
		if err != nil {
			t.Fatalf("n=%d: build: %v", n, err)
		}
		if l != HeaderOverhead+n {
			t.Fatalf("n=%d: len %d", n, l)
		}
		var g Frame
		if err := ParseFrame(buf[:l], &g); err != nil {
			t.Fatalf("n=%d: parse: %v", n, err)
		}
		want := f.Header
		want.Version = Version
		want.PayloadLen = uint16(n)
		if g.Header != want || g.SrcMAC != f.SrcMAC || g.DstMAC != f.DstMAC || g.SrcIP != f.SrcIP ||
			g.DstIP != f.DstIP || g.SrcPort != f.SrcPort || g.DstPort != f.DstPort || !bytes.Equal(g.Payload, p) {
			t.Fatalf("n=%d: mismatch\n got %+v\nwant %+v", n, g.Header, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	f := testFrame([]byte("hello world"))
	good := make([]byte, 200)
	l, _ := BuildFrame(good, &f)
	good = good[:l]
	mut := func(fn func(b []byte) []byte) []byte {
		b := append([]byte(nil), good...)
		return fn(b)
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:HeaderOverhead-1], ErrTruncated},
		{"ethertype", mut(func(b []byte) []byte { b[12] = 0x86; return b }), ErrNotNDP},
		{"ipv6 version", mut(func(b []byte) []byte { b[14] = 0x65; return b }), ErrNotNDP},
		{"ip options", mut(func(b []byte) []byte { b[14] = 0x46; return b }), ErrNotNDP},
		{"tcp", mut(func(b []byte) []byte { b[23] = 6; return b }), ErrNotNDP},
		{"fragment", mut(func(b []byte) []byte { b[20] |= 0x20; return b }), ErrNotNDP},
		{"ip len too big", mut(func(b []byte) []byte { b[16] = 0xff; return b }), ErrBadLength},
		{"ip csum", mut(func(b []byte) []byte { b[22]--; return b }), ErrBadChecksum},
		{"udp csum", mut(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrBadChecksum},
		{"udp zero csum", mut(func(b []byte) []byte { b[40], b[41] = 0, 0; return b }), ErrBadChecksum},
		{"version", mut(func(b []byte) []byte { b[offNDP] = 9; fixLengthsAndChecksums(b, len(b)-HeaderOverhead); return b }), ErrVersion},
		{"type", mut(func(b []byte) []byte { b[offNDP+1] = 99; fixLengthsAndChecksums(b, len(b)-HeaderOverhead); return b }), ErrBadType},
		{"payload len", mut(func(b []byte) []byte {
			b[offNDP+hPayloadLen+1]++
			fixLengthsAndChecksums(b, len(b)-HeaderOverhead)
			return b
		}), ErrBadLength},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var g Frame
			err := ParseFrame(c.b, &g)
			if !errors.Is(err, c.want) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("not a *ParseError: %T", err)
			}
		})
	}
}

func TestTrimAndBounce(t *testing.T) {
	f := testFrame(bytes.Repeat([]byte{0xab}, 1000))
	b := make([]byte, 2000)
	l, _ := BuildFrame(b, &f)
	b = b[:l]
	if !IsTrimmable(b) || IsControl(b) || !FramePriority(b) == (f.Header.Flags&FlagPriority != 0) {
		t.Fatal("classification of DATA frame")
	}
	n, err := TrimFrame(b)
	if err != nil || n != HeaderOverhead {
		t.Fatalf("trim: %d %v", n, err)
	}
	var g Frame
	if err := ParseFrame(b[:n], &g); err != nil {
		t.Fatalf("parse trimmed: %v", err)
	}
	if g.Header.Flags&FlagTrimmed == 0 || g.Header.PayloadLen != 1000 || len(g.Payload) != 0 {
		t.Fatalf("trimmed header %+v", g.Header)
	}
	if IsTrimmable(b[:n]) || !IsControl(b[:n]) {
		t.Fatal("trimmed frame classification")
	}
	if _, err := TrimFrame(b[:n]); err == nil {
		t.Fatal("trimmed twice")
	}
	if err := BounceFrame(b[:n]); err != nil {
		t.Fatal(err)
	}
	if err := ParseFrame(b[:n], &g); err != nil {
		t.Fatalf("parse bounced: %v", err)
	}
	if g.SrcIP != f.DstIP || g.DstIP != f.SrcIP || g.SrcMAC != f.DstMAC || g.DstMAC != f.SrcMAC ||
		g.DstPort != DefaultPort || g.Header.Flags&FlagBounced == 0 {
		t.Fatalf("bounced frame %+v", g)
	}
	if d, ok := FrameDst(b[:n]); !ok || d != f.SrcIP {
		t.Fatalf("FrameDst %v %v", d, ok)
	}
	if IsTrimmable(nil) || IsControl([]byte{1, 2}) || FramePriority(nil) {
		t.Fatal("garbage classified")
	}
	if _, ok := FrameDst([]byte{1}); ok {
		t.Fatal("FrameDst on garbage")
	}
}

func TestWireAllocs(t *testing.T) {
	f := testFrame(make([]byte, 1400))
	b := make([]byte, 2000)
	var g Frame
	bad := make([]byte, 10)
	tb := make([]byte, 2000)
	if a := testing.AllocsPerRun(100, func() {
		n, _ := BuildFrame(b, &f)
		_ = ParseFrame(b[:n], &g)
		_ = ParseFrame(bad, &g)
		copy(tb, b[:n])
		IsTrimmable(tb[:n])
		k, _ := TrimFrame(tb[:n])
		_, _ = TrimFrame(tb[:k]) // error path
		_ = BounceFrame(tb[:k])
		_ = BounceFrame(bad)
		FrameDst(tb)
		FramePriority(tb)
	}); a != 0 {
		t.Fatalf("allocs per build+parse: %v", a)
	}
}

func TestChecksumMatchesReference(t *testing.T) {
	ref := func(b []byte) uint16 {
		var s uint32
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			s += uint32(b[len(b)-1]) << 8
		}
		for s>>16 != 0 {
			s = s>>16 + s&0xffff
		}
		return uint16(s)
	}
	b := make([]byte, 300)
	for i := range b {
		b[i] = byte(i*131 + 17)
	}
	for n := 0; n <= len(b); n++ {
		if got, want := fold(sumBytes(0, b[:n])), ref(b[:n]); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("n=%d: %#x want %#x", n, got, want)
		}
	}
	for i := range b {
		b[i] = 0xff
	}
	for n := 0; n <= len(b); n++ {
		if got, want := fold(sumBytes(0, b[:n])), ref(b[:n]); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("ff n=%d: %#x want %#x", n, got, want)
		}
	}
}

func BenchmarkBuildFrame1500(b *testing.B) {
	f := testFrame(make([]byte, MaxPayload(1500)))
	buf := make([]byte, 2000)
	b.SetBytes(int64(len(f.Payload)))
	for b.Loop() {
		BuildFrame(buf, &f)
	}
}

func BenchmarkParseFrame9000(b *testing.B) {
	f := testFrame(make([]byte, MaxPayload(9000)))
	buf := make([]byte, 9100)
	n, _ := BuildFrame(buf, &f)
	var g Frame
	b.SetBytes(int64(n))
	for b.Loop() {
		ParseFrame(buf[:n], &g)
	}
}

func BenchmarkChecksum1424(b *testing.B) {
	p := make([]byte, 1424)
	for i := range p {
		p[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(p)))
	var s uint16
	for i := 0; i < b.N; i++ {
		s += fold(sumBytes(0, p))
	}
	_ = s
}

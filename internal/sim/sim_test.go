package sim

import (
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

func TestEventsRunInTimeThenInsertionOrder(t *testing.T) {
	s := New(1, 64)
	var got []int
	s.At(20, func() { got = append(got, 3) })
	s.At(10, func() { got = append(got, 1) })
	s.At(10, func() {
		got = append(got, 2)
		s.After(5, func() { got = append(got, 25) }) // runs at 15, before 20
		s.At(0, func() { got = append(got, 26) })    // in the past: runs now, after this event
	})
	s.Run(1e9, nil)
	want := []int{1, 2, 26, 25, 3}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if s.Now() != 20 {
		t.Fatalf("clock %d, want 20", s.Now())
	}
}

func TestRunStopsAtLimitAndDone(t *testing.T) {
	s := New(1, 64)
	n := 0
	var tick func()
	tick = func() { n++; s.After(10, tick) }
	s.At(0, tick)
	if s.Run(95, nil) {
		t.Fatal("Run without done reported done")
	}
	if n != 10 || s.Now() != 95 {
		t.Fatalf("ran %d ticks to %d, want 10 ticks and the clock at the limit", n, s.Now())
	}
	if !s.Run(1e9, func() bool { return n >= 20 }) || n != 20 {
		t.Fatalf("done not honoured: %d ticks", n)
	}
}

type sink struct {
	s     *Sim
	times []ndp.Time
	bufs  [][]byte
}

func (k *sink) receive(f []byte) {
	k.times = append(k.times, k.s.Now())
	k.bufs = append(k.bufs, append([]byte(nil), f...))
}

func TestLinkSerializesAndDelays(t *testing.T) {
	s := New(1, 2048)
	k := &sink{s: s}
	l := newLink(s, 10e9, 1000, k) // 10 Gb/s, 1 µs
	frames := [][]byte{make([]byte, 1226), make([]byte, 1226), make([]byte, 76)}
	l.source = func(ndp.Time) ([]byte, bool) {
		if len(frames) == 0 {
			return nil, false
		}
		f := frames[0]
		frames = frames[1:]
		return f, true
	}
	l.kick()
	s.Run(1e9, nil)
	// 1226+24 bytes = 1000 ns at 10 Gb/s; 76+24 = 80 ns.
	want := []ndp.Time{2000, 3000, 3080}
	for i, w := range want {
		if k.times[i] != w {
			t.Fatalf("arrival times %v, want %v", k.times, want)
		}
	}
	if st := l.Stats(); st.Frames != 3 || st.BusyTime != 2080 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLinkFaults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults Faults
		check  func(t *testing.T, k *sink, st LinkStats)
	}{
		{"loss", Faults{Loss: 0.2}, func(t *testing.T, k *sink, st LinkStats) {
			if st.Lost == 0 || int(st.Lost)+len(k.bufs) != 1000 {
				t.Fatalf("lost %d, delivered %d", st.Lost, len(k.bufs))
			}
		}},
		{"duplicate", Faults{Duplicate: 0.2}, func(t *testing.T, k *sink, st LinkStats) {
			if st.Duplicated == 0 || len(k.bufs) != 1000+int(st.Duplicated) {
				t.Fatalf("duplicated %d, delivered %d", st.Duplicated, len(k.bufs))
			}
		}},
		{"reorder", Faults{Reorder: 0.2, ReorderDelay: 50_000}, func(t *testing.T, k *sink, st LinkStats) {
			inversions := 0
			for i := 1; i < len(k.bufs); i++ {
				if k.bufs[i][0] < k.bufs[i-1][0] && k.bufs[i-1][0]-k.bufs[i][0] < 128 {
					inversions++
				}
			}
			if st.Reordered == 0 || inversions == 0 || len(k.bufs) != 1000 {
				t.Fatalf("reordered %d, inversions %d, delivered %d", st.Reordered, inversions, len(k.bufs))
			}
		}},
		{"corrupt", Faults{Corrupt: 0.2}, func(t *testing.T, k *sink, st LinkStats) {
			bad := 0
			for _, b := range k.bufs {
				for _, x := range b[1:] {
					if x != 0xAA {
						bad++
						break
					}
				}
			}
			if st.Corrupted == 0 || bad == 0 || uint64(bad) > st.Corrupted {
				t.Fatalf("corrupted %d, frames seen damaged %d", st.Corrupted, bad)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(7, 256)
			k := &sink{s: s}
			l := newLink(s, 10e9, 1000, k)
			l.Faults = tc.faults
			sent := 0
			l.source = func(ndp.Time) ([]byte, bool) {
				if sent == 1000 {
					return nil, false
				}
				f := s.getBuf()[:200]
				f[0] = byte(sent)
				for i := 1; i < len(f); i++ {
					f[i] = 0xAA
				}
				sent++
				return f, true
			}
			l.kick()
			s.Run(1e12, nil)
			tc.check(t, k, l.Stats())
		})
	}
}

func TestPattern(t *testing.T) {
	b := make([]byte, 1000)
	fillPattern(b, 3, 12345)
	if i := checkPattern(b, 3, 12345); i != -1 {
		t.Fatalf("pattern mismatch at %d", i)
	}
	if checkPattern(b, 4, 12345) == -1 || checkPattern(b, 3, 12346) == -1 {
		t.Fatal("pattern does not depend on flow and offset")
	}
	// Every byte is the definition's: byte o%8 of the word for o/8.
	flow := uint64(3)
	for i := range b {
		o := int64(12345 + i)
		if want := byte((patternBase(flow) + uint64(o>>3)*patternStep) >> (8 * (o & 7))); b[i] != want {
			t.Fatalf("byte %d = %#x, want %#x", i, b[i], want)
		}
	}
	// A damaged byte is found at its index, at any alignment.
	for _, at := range []int{0, 1, 7, 8, 500, 999} {
		d := append([]byte(nil), b...)
		d[at] ^= 0x40
		if got := checkPattern(d, 3, 12345); got != at {
			t.Fatalf("damage at %d found at %d", at, got)
		}
	}
	// Filling in pieces gives the same bytes as filling at once.
	c := make([]byte, 1000)
	fillPattern(c[:333], 3, 12345)
	fillPattern(c[333:], 3, 12345+333)
	for i := range b {
		if b[i] != c[i] {
			t.Fatalf("piecewise fill differs at %d", i)
		}
	}
}

package ring

import (
	"encoding/binary"
	"errors"
	"testing"
)

func newTestPool(t testing.TB) *Pool {
	t.Helper()
	p, err := NewPool(PoolConfig{Frames: 64, FrameSize: 2048, DaemonFrames: 16, AppFrames: 16})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustAttach(t testing.TB, p *Pool) (AppID, Partition) {
	t.Helper()
	app, part, err := p.AttachApp()
	if err != nil {
		t.Fatal(err)
	}
	return app, part
}

func audit(t testing.TB, p *Pool) {
	t.Helper()
	if err := p.Audit(); err != nil {
		t.Fatal(err)
	}
}

func TestPoolConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  PoolConfig
	}{
		{"no frames", PoolConfig{FrameSize: 2048}},
		{"frame size", PoolConfig{Frames: 64, FrameSize: 3}},
		{"daemon takes all", PoolConfig{Frames: 64, FrameSize: 2048, DaemonFrames: 64}},
		{"app partition too big", PoolConfig{Frames: 64, FrameSize: 2048, DaemonFrames: 32, AppFrames: 33}},
	} {
		if _, err := NewPool(tc.cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: got %v, want ErrBadConfig", tc.name, err)
		}
	}
	p, err := NewPool(PoolConfig{Frames: 4096, FrameSize: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.DaemonFrames != 2048 || s.AppFrames != 256 || s.Partitions != 8 || s.DaemonFree != 2048 {
		t.Errorf("defaults: %+v", s)
	}
}

// TestPoolSubmitValidation is the table of everything an application can
// put in a TX descriptor, and what the daemon does with it.
func TestPoolSubmitValidation(t *testing.T) {
	p := newTestPool(t)
	app, part := mustAttach(t, p)
	other, otherPart := mustAttach(t, p)
	daemonFrame := make([]uint32, 1)
	p.Alloc(daemonFrame)
	_ = other
	const fs = 2048
	tests := []struct {
		name string
		d    Desc
		want error
	}{
		{"own frame", Desc{Frame: part.First, Len: 100}, nil},
		{"own last frame, full length", Desc{Frame: part.First + part.Count - 1, Off: 48, Len: fs - 48}, nil},
		{"resubmit in flight", Desc{Frame: part.First, Len: 100}, ErrFrameNotOwned},
		{"past buffer area", Desc{Frame: 64, Len: 1}, ErrFrameRange},
		{"NoFrame", Desc{Frame: NoFrame, Len: 1}, ErrFrameRange},
		{"daemon partition", Desc{Frame: daemonFrame[0], Len: 1}, ErrFrameNotOwned},
		{"other app's partition", Desc{Frame: otherPart.First + 3, Len: 1}, ErrFrameNotOwned},
		{"idle partition", Desc{Frame: 63, Len: 1}, ErrFrameNotOwned},
		{"length past frame", Desc{Frame: part.First + 1, Off: fs - 10, Len: 11}, ErrBadLength},
		{"max off and len", Desc{Frame: part.First + 1, Off: 0xffff, Len: 0xffff}, ErrBadLength},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := *snapshot(p)
			d := tc.d
			err := p.CheckTX(app, &d)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			after := snapshot(p)
			if tc.want != nil && after.total() != before.total()+1 {
				t.Errorf("rejection not counted: %+v → %+v", before, *after)
			}
			audit(t, p)
		})
	}
	c := p.Counters()
	if c.RejectedRange.Load() != 2 || c.RejectedLength.Load() != 2 || c.RejectedNotOwned.Load() != 4 {
		t.Errorf("counters range/length/notOwned = %d/%d/%d, want 2/2/4",
			c.RejectedRange.Load(), c.RejectedLength.Load(), c.RejectedNotOwned.Load())
	}
}

type counts struct{ rng, owned, length, stale, dbl uint64 }

func (c counts) total() uint64 { return c.rng + c.owned + c.length + c.stale + c.dbl }

func snapshot(p *Pool) *counts {
	c := p.Counters()
	return &counts{c.RejectedRange.Load(), c.RejectedNotOwned.Load(), c.RejectedLength.Load(), c.RejectedStale.Load(), c.DoubleFree.Load()}
}

func TestPoolAcceptTXCompacts(t *testing.T) {
	p := newTestPool(t)
	app, part := mustAttach(t, p)
	ds := []Desc{
		{Frame: part.First, Len: 1, Aux: 1},
		{Frame: 2, Len: 1, Aux: 2}, // daemon frame
		{Frame: part.First + 1, Len: 1, Aux: 3},
		{Frame: part.First, Len: 1, Aux: 4}, // duplicate in the same batch
		{Frame: part.First + 2, Len: 1, Aux: 5},
	}
	n := p.AcceptTX(app, ds)
	if n != 3 || ds[0].Aux != 1 || ds[1].Aux != 3 || ds[2].Aux != 5 {
		t.Fatalf("AcceptTX = %d, %+v", n, ds[:n])
	}
	if s := p.Stats(); s.InFlight != 3 || s.AppOwned != part.Count-3 {
		t.Errorf("stats %+v", s)
	}
	if k, err := p.CompleteTX(app, []uint32{part.First, part.First + 1, part.First + 9}); k != 2 || !errors.Is(err, ErrFrameNotOwned) {
		t.Errorf("CompleteTX = %d, %v", k, err)
	}
	audit(t, p)
}

func TestPoolLendRelease(t *testing.T) {
	p := newTestPool(t)
	initial := p.Stats()
	a, _ := mustAttach(t, p)
	b, _ := mustAttach(t, p)
	fr := make([]uint32, 6)
	if n := p.Alloc(fr); n != 6 {
		t.Fatal(n)
	}
	if n, err := p.Lend(a, fr[:4]); n != 4 || err != nil {
		t.Fatal(n, err)
	}
	if n, err := p.Lend(b, fr[4:]); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	if n, err := p.Lend(b, fr[4:5]); n != 0 || !errors.Is(err, ErrFrameNotOwned) {
		t.Errorf("lending a lent frame: %d, %v", n, err)
	}
	audit(t, p)
	rel := []Desc{{Frame: fr[0]}, {Frame: fr[4]}, {Frame: 1000}, {Frame: fr[1]}, {Frame: fr[0]}, {Frame: 40}}
	if n := p.AcceptReleased(a, rel); n != 2 {
		t.Errorf("AcceptReleased = %d, want 2 (fr0, fr1)", n)
	}
	c := snapshot(p)
	if c.rng != 1 || c.owned != 4 { // fr4 (b's), lend of lent, fr0 again, frame 40
		t.Errorf("counters %+v", *c)
	}
	// Daemon frees: double free and freeing a lent frame are caught.
	if n, err := p.Free(fr[2:3]); n != 0 || !errors.Is(err, ErrFrameNotOwned) {
		t.Errorf("Free of a lent frame: %d, %v", n, err)
	}
	if n, err := p.Free(fr[0:1]); n != 0 || !errors.Is(err, ErrDoubleFree) {
		t.Errorf("double Free: %d, %v", n, err)
	}
	audit(t, p)
	if _, err := p.Reclaim(a); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Reclaim(b); err != nil {
		t.Fatal(err)
	}
	if got := p.Stats(); got != initial {
		t.Errorf("after reclaim %+v, want %+v", got, initial)
	}
	audit(t, p)
}

func TestPoolReclaimWithInFlightAndReuse(t *testing.T) {
	p := newTestPool(t)
	initial := p.Stats()
	app, part := mustAttach(t, p)
	lend := make([]uint32, 5)
	p.Alloc(lend)
	p.Lend(app, lend)
	ds := []Desc{{Frame: part.First, Len: 1}, {Frame: part.First + 5, Len: 1}}
	if p.AcceptTX(app, ds) != 2 {
		t.Fatal("accept")
	}
	r, err := p.Reclaim(app)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lent != 5 || r.InFlight != 2 || r.AppOwned != part.Count-2 {
		t.Errorf("reclaim report %+v", r)
	}
	audit(t, p)
	// Everything from the dead app is stale now.
	if p.AcceptTX(app, []Desc{{Frame: part.First + 1, Len: 1}}) != 0 {
		t.Error("stale app's TX accepted")
	}
	if _, err := p.Reclaim(app); !errors.Is(err, ErrStaleApp) {
		t.Errorf("second reclaim: %v", err)
	}
	// The partition is still draining: a new app gets another one.
	app2, part2 := mustAttach(t, p)
	if part2 == part {
		t.Fatal("draining partition handed out")
	}
	p.Reclaim(app2)
	// The engine's completions bring the in-flight frames home.
	if n, err := p.CompleteTX(app, []uint32{part.First, part.First + 5}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	if got := p.Stats(); got != initial {
		t.Errorf("after completions %+v, want %+v", got, initial)
	}
	audit(t, p)
	// Reuse: the slot comes back with a new generation; the old ID stays stale.
	seen := map[Partition]AppID{}
	for {
		id, pt, err := p.AttachApp()
		if errors.Is(err, ErrNoPartition) {
			break
		}
		seen[pt] = id
	}
	if len(seen) != 3 {
		t.Errorf("%d partitions after reuse, want 3", len(seen))
	}
	if id := seen[part]; id == app || id == 0 {
		t.Errorf("reused partition has id %#x (old %#x)", id, app)
	}
	if p.CheckTX(app, &Desc{Frame: part.First + 1, Len: 1}) != ErrStaleApp {
		t.Error("old id accepted after reuse")
	}
	audit(t, p)
}

func TestPoolAllocBackpressure(t *testing.T) {
	p := newTestPool(t)
	fr := make([]uint32, 100)
	if n := p.Alloc(fr); n != 16 {
		t.Fatalf("Alloc = %d, want 16", n)
	}
	if n := p.Alloc(fr); n != 0 {
		t.Fatalf("Alloc from empty pool = %d", n)
	}
	if n, err := p.Free(fr[:16]); n != 16 || err != nil {
		t.Fatal(n, err)
	}
	audit(t, p)
}

func TestFrameStack(t *testing.T) {
	s := NewFrameStack(Partition{100, 4})
	got := make([]uint32, 10)
	if n := s.Pop(got); n != 4 {
		t.Fatal(n)
	}
	if n := s.Pop(got); n != 0 {
		t.Fatal("pop from empty")
	}
	if n, err := s.Push(100, 101, 99, 101, 104); n != 2 || !errors.Is(err, ErrFrameRange) {
		t.Errorf("Push = %d, %v", n, err)
	}
	if _, err := s.Push(100); !errors.Is(err, ErrDoubleFree) {
		t.Errorf("double push: %v", err)
	}
	if s.Len() != 2 {
		t.Errorf("Len = %d", s.Len())
	}
}

func TestPoolHotPathAllocs(t *testing.T) {
	p := newTestPool(t)
	app, part := mustAttach(t, p)
	ds := make([]Desc, 8)
	frames := make([]uint32, 8)
	allocs := testing.AllocsPerRun(1000, func() {
		for i := range ds {
			ds[i] = Desc{Frame: part.First + uint32(i), Len: 64}
			frames[i] = part.First + uint32(i)
		}
		p.AcceptTX(app, ds)
		p.CompleteTX(app, frames)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per accept/complete batch", allocs)
	}
}

// FuzzDescValidation decodes arbitrary bytes as descriptors and submits them
// on every path an application controls (TX, release). Nothing may
// panic; whatever is accepted must be the submitter's own, in bounds; the
// ledger must stay consistent.
func FuzzDescValidation(f *testing.F) {
	seed := make([]byte, 4*DescSize)
	binary.LittleEndian.PutUint32(seed[0:], 16)                  // own partition
	binary.LittleEndian.PutUint32(seed[DescSize:], 40)           // other app
	binary.LittleEndian.PutUint32(seed[2*DescSize:], 3)          // daemon frame
	binary.LittleEndian.PutUint32(seed[3*DescSize:], 0xffffffff) // NoFrame
	f.Add(seed, byte(0))
	f.Add(seed[:DescSize], byte(1))
	f.Add(seed[DescSize:], byte(2))
	f.Fuzz(func(t *testing.T, data []byte, path byte) {
		p := newTestPool(t)
		app, part := mustAttach(t, p)
		mustAttach(t, p)
		lent := make([]uint32, 4)
		p.Alloc(lent)
		p.Lend(app, lent)
		var ds []Desc
		for len(data) >= DescSize {
			var d Desc
			GetDesc(data, &d)
			ds = append(ds, d)
			data = data[DescSize:]
		}
		orig := append([]Desc(nil), ds...)
		switch path % 2 {
		case 0:
			n := p.AcceptTX(app, ds)
			for _, d := range ds[:n] {
				if CheckFrameBounds(&d, part.First, part.Count, 2048) != nil {
					t.Fatalf("accepted %+v outside partition %+v", d, part)
				}
			}
			if uint64(len(orig)-n) != snapshot(p).total() {
				t.Fatalf("%d rejected, %d counted", len(orig)-n, snapshot(p).total())
			}
		case 1:
			n := p.AcceptReleased(app, ds)
			if n > len(lent) {
				t.Fatalf("released %d frames, only %d lent", n, len(lent))
			}
		}
		// Round trip of the encoding.
		var b [DescSize]byte
		for _, d := range orig {
			var back Desc
			PutDesc(b[:], &d)
			GetDesc(b[:], &back)
			if back != d {
				t.Fatalf("encoding round trip %+v → %+v", d, back)
			}
		}
		audit(t, p)
	})
}

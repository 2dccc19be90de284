package ring

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// pairInProcess creates a region (daemon side) and opens it again as the
// application would, through duplicated descriptors, in this process.
func pairInProcess(t testing.TB, cfg RegionConfig) (*DaemonEnd, *AppEnd, *Region, *Region) {
	t.Helper()
	geo := BufferGeometry{FrameSize: 2048, Frames: 1024, Part: Partition{First: 512, Count: 256}}
	dr, err := CreateRegion(cfg, makeAppID(0, 1), geo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dr.Close() })
	a := dr.Attachment(-1)
	dup := func(fd int) int {
		n, err := unix.Dup(fd)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ar, err := OpenRegion(Attachment{Region: dup(a.Region), WakeDaemon: dup(a.WakeDaemon), WakeApp: dup(a.WakeApp), Buffer: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ar.Close() })
	de, err := dr.DaemonEnd()
	if err != nil {
		t.Fatal(err)
	}
	ae, err := ar.AppEnd()
	if err != nil {
		t.Fatal(err)
	}
	return de, ae, dr, ar
}

func TestEndsTakenOnceAndBySide(t *testing.T) {
	_, _, dr, ar := pairInProcess(t, RegionConfig{Sockets: 1})
	if _, err := dr.DaemonEnd(); err == nil {
		t.Error("second DaemonEnd succeeded")
	}
	if _, err := ar.DaemonEnd(); err == nil {
		t.Error("DaemonEnd on the app's region succeeded")
	}
	if _, err := dr.AppEnd(); err == nil {
		t.Error("AppEnd on the daemon's region succeeded")
	}
}

func TestRingProduceConsumeBackpressure(t *testing.T) {
	de, ae, _, _ := pairInProcess(t, RegionConfig{Sockets: 2, SocketSlots: 8})
	tx, rx := ae.Sockets[1].TX, de.Sockets[1].TX
	var in [20]Desc
	for i := range in {
		in[i] = Desc{Frame: uint32(600 + i), Off: 16, Len: uint16(100 + i), Conn: 7, Op: OpData, Flags: FlagLast, Aux: uint64(i) << 40, Cookie: ^uint64(i)}
	}
	// Full ring is a short count, not an error.
	n, err := tx.Produce(in[:])
	if err != nil || n != 8 {
		t.Fatalf("Produce into 8 slots = %d, %v; want 8, nil", n, err)
	}
	if n, err := tx.Produce(in[8:]); err != nil || n != 0 {
		t.Fatalf("Produce into full ring = %d, %v; want 0, nil", n, err)
	}
	// Peek does not consume; Release frees.
	var out [20]Desc
	if n, _ := rx.Peek(out[:3]); n != 3 || out[0] != in[0] || out[2] != in[2] {
		t.Fatalf("Peek = %d %+v", n, out[:3])
	}
	if n, _ := rx.Peek(out[:5]); n != 5 || out[0] != in[0] {
		t.Fatalf("second Peek = %d, first %+v", n, out[0])
	}
	if got := rx.Release(3); got != 3 {
		t.Fatalf("Release(3) = %d", got)
	}
	if n, _ := tx.Produce(in[8:]); n != 3 {
		t.Fatalf("Produce after releasing 3 = %d, want 3", n)
	}
	// Drain across the wrap: 5 old + 3 new, in order.
	n, err = rx.Consume(out[:])
	if err != nil || n != 8 {
		t.Fatalf("Consume = %d, %v", n, err)
	}
	for i := 0; i < 8; i++ {
		if out[i] != in[3+i] {
			t.Fatalf("out[%d] = %+v, want %+v", i, out[i], in[3+i])
		}
	}
	if got := rx.Release(5); got != 0 {
		t.Errorf("Release beyond available released %d", got)
	}
	if n, _ := rx.Consume(out[:]); n != 0 {
		t.Errorf("Consume of empty ring = %d", n)
	}
	// Other rings untouched.
	if n, _ := de.Sockets[0].TX.Consume(out[:]); n != 0 {
		t.Errorf("socket 0 TX has %d descriptors", n)
	}
}

// TestRingCorruptPeerIndex plays a hostile peer that writes garbage into the
// shared index words: the victim's ring is poisoned, never indexes out of
// bounds, never panics.
func TestRingCorruptPeerIndex(t *testing.T) {
	for _, tc := range []struct {
		name   string
		poke   func(de *DaemonEnd, ae *AppEnd)
		victim func(de *DaemonEnd) error
	}{
		{"producer jumps ahead", func(de *DaemonEnd, ae *AppEnd) {
			atomic.StoreUint64(ae.Sockets[0].TX.prodIdx, 1000)
		}, func(de *DaemonEnd) error { var d [4]Desc; _, err := de.Sockets[0].TX.Consume(d[:]); return err }},
		{"producer goes backwards", func(de *DaemonEnd, ae *AppEnd) {
			var d [4]Desc
			ae.Sockets[0].TX.Produce(d[:])
			de.Sockets[0].TX.Peek(d[:1])
			atomic.StoreUint64(ae.Sockets[0].TX.prodIdx, ^uint64(0))
		}, func(de *DaemonEnd) error { var d [8]Desc; _, err := de.Sockets[0].TX.Peek(d[:]); return err }},
		{"consumer passes producer", func(de *DaemonEnd, ae *AppEnd) {
			atomic.StoreUint64(ae.Sockets[0].RX.consIdx, 5)
		}, func(de *DaemonEnd) error { _, err := de.Sockets[0].RX.Free(); return err }},
		{"consumer goes backwards", func(de *DaemonEnd, ae *AppEnd) {
			var d [8]Desc
			de.Events.Produce(d[:])
			ae.Events.Consume(d[:4])
			de.Events.Free() // caches consumer position 4
			atomic.StoreUint64(ae.Events.consIdx, 1)
		}, func(de *DaemonEnd) error { _, err := de.Events.Free(); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			de, ae, _, _ := pairInProcess(t, RegionConfig{Sockets: 1, SocketSlots: 16})
			tc.poke(de, ae)
			if err := tc.victim(de); !errors.Is(err, ErrRingCorrupt) {
				t.Fatalf("got %v, want ErrRingCorrupt", err)
			}
			if err := tc.victim(de); !errors.Is(err, ErrRingCorrupt) {
				t.Fatalf("ring not poisoned: second call got %v", err)
			}
		})
	}
}

func TestRingHotPathAllocs(t *testing.T) {
	de, ae, _, _ := pairInProcess(t, RegionConfig{Sockets: 1, SocketSlots: 64})
	in := make([]Desc, 32)
	out := make([]Desc, 32)
	allocs := testing.AllocsPerRun(1000, func() {
		ae.Sockets[0].TX.Produce(in)
		de.Sockets[0].TX.Peek(out)
		de.Sockets[0].TX.Release(len(out))
		ae.Notifier.Notify()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per produce/peek/release/notify", allocs)
	}
}

// TestRingConcurrentGoroutines runs producer and consumer in two goroutines
// of one process (so -race sees both sides) with sleeping on empty/full.
func TestRingConcurrentGoroutines(t *testing.T) {
	de, ae, _, _ := pairInProcess(t, RegionConfig{Sockets: 1, SocketSlots: 64})
	const total = 200_000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := ae.Sockets[0].TX
		batch := make([]Desc, 16)
		for seq := uint64(0); seq < total; {
			k := min(uint64(len(batch)), total-seq)
			for i := uint64(0); i < k; i++ {
				batch[i] = Desc{Frame: uint32(seq + i), Aux: seq + i, Cookie: (seq + i) * 0x9e3779b97f4a7c15}
			}
			n, err := p.Produce(batch[:k])
			if err != nil {
				t.Error(err)
				return
			}
			seq += uint64(n)
			ae.Notifier.Notify()
			if n == 0 {
				if err := ae.Waiter.Wait(p.HasSpace, -1); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	c := de.Sockets[0].TX
	out := make([]Desc, 16)
	for want := uint64(0); want < total; {
		n, err := c.Consume(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range out[:n] {
			if d.Aux != want || d.Frame != uint32(want) || d.Cookie != want*0x9e3779b97f4a7c15 {
				t.Fatalf("got %+v, want seq %d", d, want)
			}
			want++
		}
		de.Notifier.Notify()
		if n == 0 {
			if err := de.Waiter.Wait(c.Pending, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
}

func BenchmarkRingInProcess(b *testing.B) {
	de, ae, _, _ := pairInProcess(b, RegionConfig{Sockets: 1, SocketSlots: 1024})
	in := make([]Desc, 64)
	out := make([]Desc, 64)
	b.SetBytes(DescSize)
	for i := 0; i < b.N; i += 64 {
		ae.Sockets[0].TX.Produce(in)
		de.Sockets[0].TX.Consume(out)
	}
}

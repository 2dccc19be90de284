package engine

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// bulkAllocs moves a transfer through a and b with the blocking API as an
// application does (Write on this goroutine, Read to EOF on another, the
// background pollers running) and returns the heap allocations the whole
// process made while the measured part crossed, with the DATA packets it
// took (the least of three parts). A warm-up of the same size on the
// same connection comes first, so lazily made waiter channels, pools and
// queues are at their steady size.
func bulkAllocs(t *testing.T, a, b *Stack, ipB [4]byte, size int) (mallocs, packets uint64) {
	t.Helper()
	l, err := b.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	chunk := make([]byte, size)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	if _, err := c.Write(chunk[:1], false, nil); err != nil {
		t.Fatal(err)
	}
	sc, err := l.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	// The reader reports each time another size bytes arrived.
	arrived := make(chan error, 2)
	go func() {
		buf := make([]byte, 256<<10)
		want, got := 1+size, 0
		for {
			n, err := sc.Read(buf, nil)
			got += n
			if err != nil {
				arrived <- err
				return
			}
			if got >= want {
				arrived <- nil
				want += size
			}
		}
	}()
	send := func() {
		if _, err := c.Write(chunk, false, nil); err != nil {
			t.Fatal(err)
		}
		if err := <-arrived; err != nil {
			t.Fatal(err)
		}
	}
	send() // warm-up
	send()
	// No GC during the measured part: a GC empties the runtime's sudog
	// caches, and the next goroutine that parks on a channel allocates a
	// fresh one, which is the runtime's allocation, not the data path's.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// The least of three measured parts: the runtime allocates now and
	// then on its own (an OS thread started for a goroutine blocked in a
	// syscall), which a steady-state data path never does.
	mallocs = ^uint64(0)
	for range 3 {
		var m0, m1 runtime.MemStats
		p0 := a.Stats().Endpoint.DataOut
		runtime.ReadMemStats(&m0)
		send()
		runtime.ReadMemStats(&m1)
		if m := m1.Mallocs - m0.Mallocs; m < mallocs {
			mallocs, packets = m, a.Stats().Endpoint.DataOut-p0
		}
	}
	return mallocs, packets
}

// TestBulkNoAllocsPerPacket: a bulk transfer through two stacks over the
// in-memory cable allocates nothing per packet at either end, with the
// real blocking Read and Write, their waits and the background pollers.
// What the whole process allocates over 8 MiB (~5,900 DATA packets) must
// stay below one allocation per 1000 packets (the test's own goroutines
// and the runtime's; per 100 under -race, whose runtime allocates more;
// TestPollAllocs checks the poll loop alone: exactly zero).
func TestBulkNoAllocsPerPacket(t *testing.T) {
	a, b, _, _ := memPair(t, PollAdaptive, nil)
	checkBulkAllocs(t, a, b, ipB)
}

func checkBulkAllocs(t *testing.T, a, b *Stack, ipB [4]byte) {
	t.Helper()
	checkBulkAllocsSize(t, a, b, ipB, 8<<20, 5000)
}

// checkBulkAllocsSize is checkBulkAllocs over size bytes, which must take
// at least minPkts DATA packets.
func checkBulkAllocsSize(t *testing.T, a, b *Stack, ipB [4]byte, size int, minPkts uint64) {
	t.Helper()
	mallocs, pkts := bulkAllocs(t, a, b, ipB, size)
	t.Logf("%d allocations over %d DATA packets", mallocs, pkts)
	per := uint64(1000)
	if raceEnabled {
		per = 100 // the race runtime's own allocations
	}
	if pkts < minPkts || mallocs*per > pkts {
		t.Errorf("%d allocations over %d DATA packets, want fewer than one per %d", mallocs, pkts, per)
	}
}

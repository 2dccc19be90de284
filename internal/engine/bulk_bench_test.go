package engine

import (
	"context"
	"runtime"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
	"golang.org/x/sys/unix"
)

// BenchmarkMemBulk is the software cost of a bulk transfer per DATA packet,
// both ends together, with no link cost: one goroutine (locked to its
// thread) writes 1 MiB at a time into one connection and drives both
// stacks (Poll) and the reader over an in-memory cable until it all
// arrived. The pull pacer runs at 1 Tb/s so the CPU, not the pull clock,
// sets the pace. cpu-ns/pkt is the thread's CPU time per DATA packet
// (CLOCK_THREAD_CPUTIME_ID, so other load on the machine changes it
// little); it includes the receiver's copy into the application's buffer
// but no hashing. Run with -cpuprofile to see where it goes.
func BenchmarkMemBulk(b *testing.B) {
	for _, mtu := range []int{1500, 9000} {
		b.Run(map[int]string{1500: "mtu1500", 9000: "mtu9000"}[mtu], func(b *testing.B) { benchMemBulk(b, mtu) })
	}
}

func benchMemBulk(b *testing.B, mtu int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	la, lb := NewMemPipe(MemConfig{FrameCap: mtu + 14}, macA, macB)
	mk := func(l *MemLink, ip [4]byte, seed uint64) *Stack {
		s, err := New(Config{
			Link:     l,
			Endpoint: ndp.Config{LocalIP: ip, Seed: seed},
			Resolver: StaticResolver{ipA: macA, ipB: macB},
			LinkRate: 1e12, NoBackground: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	snd, rcv := mk(la, ipA, 1), mk(lb, ipB, 2)
	l, err := rcv.Listen(7, 0)
	if err != nil {
		b.Fatal(err)
	}
	c, err := snd.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	rbuf := make([]byte, 256<<10)
	if _, err := c.Write(chunk[:1], false, nil); err != nil {
		b.Fatal(err)
	}
	sc, err := l.Accept(nil)
	if err != nil {
		b.Fatal(err)
	}
	pump := func() {
		sent := 0
		got := 0
		for spins := 0; got < len(chunk); spins++ {
			if sent < len(chunk) {
				n, err := snd.ep.Write(c.h, chunk[sent:], snd.Now())
				if err != nil {
					b.Fatal(err)
				}
				sent += n
			}
			snd.Poll()
			rcv.Poll()
			for sc.Readable() > 0 {
				n, err := sc.Read(rbuf, nil)
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
			if spins > 1e7 {
				b.Fatalf("stalled: %d of %d bytes arrived", got, len(chunk))
			}
		}
	}
	pump()
	before := snd.Stats().Endpoint.DataOut
	cpu0 := threadCPU()
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pump()
	}
	b.StopTimer()
	pkts := snd.Stats().Endpoint.DataOut - before
	b.ReportMetric(float64(threadCPU()-cpu0)/float64(pkts), "cpu-ns/pkt")
	b.ReportMetric(float64(pkts)/float64(b.N), "pkts/op")
}

// threadCPU is the calling thread's CPU time in ns.
func threadCPU() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}

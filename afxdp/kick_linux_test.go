package afxdp

import (
	"errors"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// Put publishes frames without the syscall; in copy mode nothing leaves
// until a Kick, which another goroutine may make while the owner goes on
// using the queue. After Close a Kick returns ErrClosed and touches no fd.
func TestPutThenKickFromAnotherGoroutine(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := pair.Veth
	pa := openIn(t, pair.A, Config{Interface: v.A.Name, UDPPort: testPort, NumFrames: 512, RingSize: 64, Bind: BindCopy})
	srv := udpIn(t, pair.B, v.B.Addr.Addr(), 7101)
	f := frameTo(v, 7101)
	u := pa.UMEM()
	q := pa.Queues()[0]
	descs := make([]Desc, 2)
	if n := u.Alloc(descs); n != 2 {
		t.Fatalf("Alloc %d of 2", n)
	}
	for i, pl := range []string{"first", "second"} {
		descs[i].Len = uint32(f.Build(u.Buffer(descs[i]), []byte(pl)))
	}
	if n, err := q.Put(descs); n != 2 || err != nil {
		t.Fatalf("Put: %d, %v", n, err)
	}
	if got, err := recvUDP(t, srv, 50*time.Millisecond); err == nil {
		t.Fatalf("datagram %q arrived before any Kick", got)
	}
	kicks := q.ctr.txKicks.Load()
	done := make(chan error, 1)
	go func() { done <- q.Kick() }()
	if err := <-done; err != nil {
		t.Fatalf("Kick: %v", err)
	}
	for _, want := range []string{"first", "second"} {
		got, err := recvUDP(t, srv, 5*time.Second)
		if err != nil || string(got) != want {
			t.Fatalf("got %q (%v), want %q", got, err, want)
		}
	}
	if k := q.ctr.txKicks.Load() - kicks; k != 1 {
		t.Fatalf("%d sendto for one Kick", k)
	}
	// Nothing left on the ring: a second Kick makes no syscall.
	if err := q.Kick(); err != nil {
		t.Fatal(err)
	}
	if k := q.ctr.txKicks.Load() - kicks; k != 1 {
		t.Fatalf("a Kick with nothing published made a sendto (%d in all)", k)
	}
	deadline := time.Now().Add(5 * time.Second)
	for q.TxOutstanding() > 0 && time.Now().Before(deadline) {
		q.Complete()
	}
	if err := u.Accounting().Check(); err != nil {
		t.Fatal(err)
	}
	pa.Close()
	if err := q.Kick(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Kick after Close: %v, want ErrClosed", err)
	}
}

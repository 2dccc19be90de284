package ndp

import "testing"

// Received counts in-order bytes and bytes stored past a hole, not the hole.
func TestReceivedCountsStoredBytes(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	mss := a.MSS()
	h, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Write(h, pattern(1, 5*mss), 0)
	rs := poll(t, a, 0, true)
	if len(rs) != 5 {
		t.Fatalf("%d packets pushed", len(rs))
	}
	deliver(t, b, 1*us, rs[0], rs[2], rs[4]) // holes at 1 and 3
	ev, ok := findEvent(events(b), EventAccepted)
	if !ok {
		t.Fatal("no EventAccepted")
	}
	if n, ok := b.Received(ev.Handle); !ok || n != uint64(3*mss) {
		t.Fatalf("Received %d, %v; want %d", n, ok, 3*mss)
	}
	deliver(t, b, 2*us, rs[1], rs[3])
	if n, _ := b.Received(ev.Handle); n != uint64(5*mss) {
		t.Fatalf("Received %d after the holes filled, want %d", n, 5*mss)
	}
	if _, ok := b.Received(Handle(12345)); ok {
		t.Fatal("Received of an unknown handle")
	}
}

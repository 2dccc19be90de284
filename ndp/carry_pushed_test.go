package ndp

import "testing"

// A DATA frame that carries an ACK follows PollFrame's pacing contract like
// any other: unsolicited data of a connection that did not ask for pacing is
// reported with pushed = false (the driver's edge pacer must not be charged
// for it) and is not held back while allowPush is false; a paced
// connection's is reported pushed and held back.
func TestCarriedAckPacingContract(t *testing.T) {
	for _, tc := range []struct {
		paced, allowPush bool
		wantCarried      bool
		wantPushed       bool
	}{
		{paced: false, allowPush: true, wantCarried: true, wantPushed: false},
		{paced: false, allowPush: false, wantCarried: true, wantPushed: false},
		{paced: true, allowPush: true, wantCarried: true, wantPushed: true},
		{paced: true, allowPush: false, wantCarried: false},
	} {
		a, b := mkEP(t, ipA, coalescing), mkEP(t, ipB, coalescing)
		if err := b.Listen(80); err != nil {
			t.Fatal(err)
		}
		h, err := a.Dial(addrOf(b, 80), DialOptions{Paced: tc.paced}, 0)
		if err != nil {
			t.Fatal(err)
		}
		a.Write(h, []byte("request"), 0)
		deliver(t, b, 5*us, poll(t, a, 0, true)...)
		ev, ok := findEvent(events(b), EventAccepted)
		if !ok {
			t.Fatal("not accepted")
		}
		b.Write(ev.Handle, []byte("answer"), 6*us)
		out := poll(t, b, 6*us, tc.allowPush)
		var carried *rec
		for i := range out {
			if out[i].f.Header.Type == TypeData && out[i].f.Header.Flags&FlagAck != 0 {
				carried = &out[i]
			}
		}
		if (carried != nil) != tc.wantCarried {
			t.Errorf("paced=%v allowPush=%v: answer carries the ACK: %v, want %v (frames %d)",
				tc.paced, tc.allowPush, carried != nil, tc.wantCarried, len(out))
			continue
		}
		if carried != nil && carried.pushed != tc.wantPushed {
			t.Errorf("paced=%v allowPush=%v: the carrying DATA reported pushed=%v, want %v",
				tc.paced, tc.allowPush, carried.pushed, tc.wantPushed)
		}
	}
}

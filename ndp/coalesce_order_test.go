package ndp

import "testing"

// A PULL released after a NACK of the same connection must not reach the
// sender ahead of that NACK by merging into an earlier queued ACK frame:
// the sender would spend the pull before it knew of the retransmission (a
// PULL finding nothing to send is discarded) and the trimmed packet would
// wait for a stall probe.
func TestCoalescedPullStaysBehindNack(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, coalescing)
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	mss := a.MSS()
	h, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Write(h, pattern(1, 2*mss), 0)
	data := poll(t, a, 0, true)
	if len(data) != 2 || data[1].f.Header.Flags&FlagLast == 0 {
		t.Fatalf("pushed %d packets, want 2 ending with LAST", len(data))
	}
	trimmed := append([]byte(nil), data[1].b...)
	n, err := TrimFrame(trimmed)
	if err != nil {
		t.Fatal(err)
	}
	b.HandleFrame(data[0].b, 10*us)
	b.HandleFrame(trimmed[:n], 10*us)
	for _, ev := range events(b) {
		if ev.Kind == EventPulls {
			for i := 0; i < ev.Count; i++ {
				b.PullReleased(ev.Handle, 10*us)
			}
		}
	}
	out := poll(t, b, 10*us, true)
	nackAt, pullAt := -1, -1
	for i, r := range out {
		hd := r.f.Header
		if hd.Type == TypeNack && nackAt < 0 {
			nackAt = i
		}
		if hd.Type == TypePull || hd.Flags&FlagPull != 0 {
			pullAt = i
		}
	}
	if nackAt < 0 || pullAt < nackAt {
		t.Errorf("receiver's frames put the PULL (frame %d) ahead of the NACK (frame %d)", pullAt, nackAt)
	}
	deliver(t, a, 20*us, out...)
	rtx := ofType(poll(t, a, 20*us, true), TypeData)
	if len(rtx) != 1 || rtx[0].f.Header.Seq != data[1].f.Header.Seq {
		t.Fatalf("the sender answered the pull with %d DATA frames, want the trimmed packet's retransmission", len(rtx))
	}
}

package ndp

import "testing"

// DATA sent in answer to a PULL carries FlagPulled; the receiver adds up how far such
// packets fall short of a full frame, for the host's pull pacer to give back
// (TakePullShortfall). Pushed packets and trimmed headers add nothing.
func TestPulledDataShortfall(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	mss := a.MSS()
	tail := 100
	h, _ := dialWrite(t, a, b, a.cfg.IW*mss+tail, DialOptions{})
	pushed := poll(t, a, 0, true)
	if len(pushed) != a.cfg.IW {
		t.Fatalf("pushed %d, want IW %d", len(pushed), a.cfg.IW)
	}
	for _, r := range pushed {
		if r.f.Header.Flags&FlagPulled != 0 {
			t.Fatal("a pushed packet is marked pulled")
		}
	}
	deliver(t, b, 1*us, pushed...)
	if got := b.TakePullShortfall(); got != 0 {
		t.Fatalf("shortfall %d after full pushed packets, want 0", got)
	}
	// B's first pull elicits the short tail.
	var bh Handle
	for _, ev := range events(b) {
		if ev.Kind == EventPulls {
			bh = ev.Handle
		}
	}
	if bh == 0 {
		t.Fatal("no pulls after the first window")
	}
	b.PullReleased(bh, 2*us)
	deliver(t, a, 3*us, ofType(poll(t, b, 2*us, true), TypePull)...)
	rs := ofType(poll(t, a, 3*us, true), TypeData)
	if len(rs) != 1 || rs[0].f.Header.Flags&FlagPulled == 0 || len(rs[0].f.Payload) != tail {
		t.Fatalf("pulled packets %d, first %+v", len(rs), rs)
	}
	deliver(t, b, 4*us, rs...)
	if got := b.TakePullShortfall(); got != mss-tail {
		t.Fatalf("shortfall %d, want %d", got, mss-tail)
	}
	if got := b.TakePullShortfall(); got != 0 {
		t.Fatalf("shortfall not reset: %d", got)
	}
	_ = h
}

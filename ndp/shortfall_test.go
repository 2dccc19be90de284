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

// A duplicate of a pulled packet, or a pulled packet for no connection, refunds
// nothing: only new data of a live connection used a pull slot.
func TestPullShortfallIgnoresDuplicatesAndStrangers(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	mss := a.MSS()
	dialWrite(t, a, b, a.cfg.IW*mss+100, DialOptions{})
	deliver(t, b, 1*us, poll(t, a, 0, true)...)
	var bh Handle
	for _, ev := range events(b) {
		if ev.Kind == EventPulls {
			bh = ev.Handle
		}
	}
	b.PullReleased(bh, 2*us)
	deliver(t, a, 3*us, ofType(poll(t, b, 2*us, true), TypePull)...)
	rs := ofType(poll(t, a, 3*us, true), TypeData)
	deliver(t, b, 4*us, rs...)
	b.TakePullShortfall()
	deliver(t, b, 5*us, rs...) // the same pulled packet again
	if got := b.TakePullShortfall(); got != 0 {
		t.Fatalf("a duplicate refunded %d bytes", got)
	}
	// A short pulled DATA frame for a connection b never heard of.
	bc := b.Config()
	f := Frame{SrcMAC: [6]byte{2, 0, 0, 0, 0, 9}, DstMAC: bc.LocalMAC, SrcIP: [4]byte{10, 0, 0, 9}, DstIP: bc.LocalIP,
		SrcPort: 50000, DstPort: bc.UDPPort,
		Header:  Header{Type: TypeData, Flags: FlagPulled, SrcPort: 7, DstPort: 80, ConnID: 12345, Seq: 99, PayloadLen: 10},
		Payload: make([]byte, 10)}
	buf := make([]byte, HeaderOverhead+10)
	n, err := BuildFrame(buf, &f)
	if err != nil {
		t.Fatal(err)
	}
	b.HandleFrame(buf[:n], 6*us)
	if got := b.TakePullShortfall(); got != 0 {
		t.Fatalf("a pulled frame for no connection refunded %d bytes", got)
	}
}

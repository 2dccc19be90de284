package ndp

import (
	"testing"
	"time"
)

func holdingAcks(c *Config) {
	c.CoalesceControl = true
	c.AckHold = 200 * time.Microsecond
}

// With AckHold a pulled connection's ACKs wait for its next PULL and leave in
// that PULL's frame, even when the pull slot comes after the ACKs' own
// transmit batch; with nothing to pull they leave after AckHold (the
// connection's timer), and the sender's LAST releases them at once.
func TestAckHold(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, holdingAcks)
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	mss := a.MSS()
	h, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Write(h, pattern(1, 60*mss), 0)
	data := poll(t, a, 0, true)
	if len(data) != a.cfg.IW {
		t.Fatalf("pushed %d, want IW %d", len(data), a.cfg.IW)
	}

	// Three arrivals: their ACKs are held, nothing leaves before the pull
	// pacer releases a PULL; the timer is armed for the hold.
	deliver(t, b, 10*us, data[:3]...)
	ev := events(b)
	if n := countPulls(ev); n != 3 {
		t.Fatalf("%d pulls for 3 arrivals", n)
	}
	if out := poll(t, b, 10*us, true); len(out) != 0 {
		t.Fatalf("%d frames before any PULL was released, want the ACKs held", len(out))
	}
	if at, ok := b.NextTimer(); !ok || at != 10*us+Time(200*time.Microsecond) {
		t.Fatalf("receiver timer %v %v, want the hold's end %v", at, ok, 10*us+Time(200*time.Microsecond))
	}
	// One pull slot later the PULL carries all three ACKs.
	pulled, _ := findEvent(ev, EventPulls)
	b.PullReleased(pulled.Handle, 60*us)
	out := poll(t, b, 60*us, true)
	if len(out) != 1 {
		t.Fatalf("%d frames at the pull slot, want one ACK carrying the PULL", len(out))
	}
	hd := out[0].f.Header
	if hd.Type != TypeAck || hd.Flags&(FlagAckMore|FlagPull) != FlagAckMore|FlagPull ||
		hd.Seq != data[0].f.Header.Seq || hd.Offset != 0b11 || hd.PullCounter != 1 {
		t.Fatalf("frame at the pull slot %+v, want ACK of %d + bitmap 0b11 with pull counter 1", hd, data[0].f.Header.Seq)
	}
	deliver(t, a, 70*us, out...)
	if st := a.Stats(); st.AcksIn != 1 || st.PullsIn != 1 {
		t.Fatalf("sender: AcksIn %d PullsIn %d, want 1 and 1", st.AcksIn, st.PullsIn)
	}
	if _, ok := a.RTT(h); !ok {
		t.Fatal("no RTT sample from the held ACK")
	}

	// Another arrival and no PULL released: the ACK leaves when the hold
	// ends (HandleTimers), not before.
	deliver(t, b, 100*us, data[3])
	events(b)
	if out := poll(t, b, 100*us, true); len(out) != 0 {
		t.Fatalf("%d frames right after the arrival, want the ACK held", len(out))
	}
	b.HandleTimers(100*us + Time(199*time.Microsecond))
	if out := poll(t, b, 100*us+Time(199*time.Microsecond), true); len(out) != 0 {
		t.Fatalf("%d frames before the hold ended", len(out))
	}
	b.HandleTimers(100*us + Time(200*time.Microsecond))
	out = poll(t, b, 100*us+Time(200*time.Microsecond), true)
	if len(out) != 1 || out[0].f.Header.Type != TypeAck || out[0].f.Header.Seq != data[3].f.Header.Seq || out[0].f.Header.Flags&FlagPull != 0 {
		t.Fatalf("after the hold: %d frames %+v, want a plain ACK of %d", len(out), out, data[3].f.Header.Seq)
	}

	// A sender's LAST: the receiver drops its pulls, so the held ACKs leave
	// at once (one frame, the first packet's ACK with a bitmap).
	a2, b2 := mkEP(t, ipA, nil), mkEP(t, ipB, holdingAcks)
	if err := b2.Listen(80); err != nil {
		t.Fatal(err)
	}
	h2, err := a2.Dial(addrOf(b2, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	a2.Write(h2, pattern(2, 2*mss), 0)
	short := poll(t, a2, 0, true)
	if len(short) != 2 || short[1].f.Header.Flags&FlagLast == 0 {
		t.Fatalf("short write: %d packets, want 2 with LAST on the second", len(short))
	}
	deliver(t, b2, 10*us, short...)
	events(b2)
	out = poll(t, b2, 10*us, true)
	if len(out) != 1 || out[0].f.Header.Type != TypeAck || out[0].f.Header.Seq != short[0].f.Header.Seq || out[0].f.Header.Offset != 1 {
		t.Fatalf("after LAST: %d frames %+v, want one ACK of both packets at once", len(out), out)
	}
}

// With AckHold the ACK of a one-packet message waits for the receiver's
// answer and rides in its DATA frame (one frame each way per exchange);
// without an answer it leaves when the hold ends; a FIN's ACK leaves at once.
func TestAckHoldForAnswer(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, holdingAcks)
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	h, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.Write(h, pattern(1, 100), 0)
	req := poll(t, a, 0, true)
	if len(req) != 1 || req[0].f.Header.Flags&FlagLast == 0 {
		t.Fatalf("request: %d frames, want one DATA with LAST", len(req))
	}
	deliver(t, b, 10*us, req...)
	acc, ok := findEvent(events(b), EventAccepted)
	if !ok {
		t.Fatal("no EventAccepted")
	}
	if out := poll(t, b, 10*us, true); len(out) != 0 {
		t.Fatalf("%d frames before the answer, want the request's ACK held", len(out))
	}
	if at, ok := b.NextTimer(); !ok || at != 10*us+Time(200*time.Microsecond) {
		t.Fatalf("receiver timer %v %v, want the hold's end", at, ok)
	}
	buf := make([]byte, 100)
	if n, err := b.Read(acc.Handle, buf); n != 100 || err != nil {
		t.Fatalf("read %d %v", n, err)
	}
	b.Write(acc.Handle, pattern(2, 100), 20*us)
	ans := poll(t, b, 20*us, true)
	if len(ans) != 1 || ans[0].f.Header.Type != TypeData || ans[0].f.Header.Flags&FlagAck == 0 ||
		ans[0].f.Header.PullCounter != req[0].f.Header.Seq || ans[0].f.Header.AckPath != uint8(req[0].f.Header.PathID+1) {
		t.Fatalf("answer %+v, want one DATA carrying the ACK of %d (path %d)", ans, req[0].f.Header.Seq, req[0].f.Header.PathID)
	}
	if at, ok := b.NextTimer(); ok && at == 10*us+Time(200*time.Microsecond) {
		t.Fatal("receiver timer still armed for the carried ACK")
	}
	deliver(t, a, 30*us, ans...)
	if rtt, ok := a.RTT(h); !ok || rtt.Samples != 1 || rtt.SRTT != 30*time.Microsecond {
		t.Fatalf("sender RTT %v %v, want the carried ACK's 30us", rtt, ok)
	}

	// No answer: the ACK leaves when the hold ends.
	a.Write(h, pattern(3, 100), 40*us)
	req2 := ofType(poll(t, a, 40*us, true), TypeData)
	if len(req2) != 1 {
		t.Fatalf("second request: %d DATA frames, want 1", len(req2))
	}
	deliver(t, b, 50*us, req2...)
	events(b)
	b.HandleTimers(50*us + Time(199*time.Microsecond))
	if out := poll(t, b, 50*us+Time(199*time.Microsecond), true); len(out) != 0 {
		t.Fatalf("%d frames before the hold ended", len(out))
	}
	b.HandleTimers(50*us + Time(200*time.Microsecond))
	out := poll(t, b, 50*us+Time(200*time.Microsecond), true)
	if len(out) != 1 || out[0].f.Header.Type != TypeAck || out[0].f.Header.Seq != req2[0].f.Header.Seq {
		t.Fatalf("after the hold: %+v, want an ACK frame of %d", out, req2[0].f.Header.Seq)
	}

	// A FIN's ACK is not held.
	a.Write(h, pattern(4, 100), 300*us)
	a.CloseWrite(h, 300*us)
	fin := ofType(poll(t, a, 300*us, true), TypeData)
	if len(fin) != 1 || fin[0].f.Header.Flags&(FlagFIN|FlagLast) != FlagFIN|FlagLast {
		t.Fatalf("closing write: %+v, want one DATA with FIN and LAST", fin)
	}
	deliver(t, b, 310*us, fin...)
	events(b)
	out = poll(t, b, 310*us, true)
	if len(out) != 1 || out[0].f.Header.Type != TypeAck || out[0].f.Header.Seq != fin[0].f.Header.Seq {
		t.Fatalf("after FIN: %+v, want its ACK at once", out)
	}
}

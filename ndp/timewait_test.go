package ndp

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// A new-connection RPC (request and response of one packet each, with FIN)
// over a testNet whose frames can be delayed or lost per direction and
// type, to put late copies in front of a time-wait entry.
type twRPC struct {
	*testNet
	h         Handle // the dialer's connection
	req, resp []byte
}

func newTWRPC(t *testing.T) *twRPC {
	r := &twRPC{testNet: newTestNet(t, 11, Config{}, Config{}), req: pattern(1, 1000), resp: pattern(2, 500)}
	if err := r.hosts[1].ep.Listen(80); err != nil {
		t.Fatal(err)
	}
	h, err := r.hosts[0].ep.Dial(r.addr(1, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	return r
}

// call sends the request, answers it once the server read it whole, and
// runs until the server's connection closed.
func (r *twRPC) call(t *testing.T) {
	t.Helper()
	r.writeAll(0, r.h, r.req, true)
	srv := r.hosts[1]
	if !r.run(1_000_000, func() bool { return len(srv.accepted) > 0 && srv.eof[srv.accepted[0]] }) {
		t.Fatalf("request not read: %v", r)
	}
	r.writeAll(1, srv.accepted[0], r.resp, true)
	if !r.run(1_000_000, func() bool { _, ok := srv.closed[srv.accepted[0]]; return ok }) {
		t.Fatalf("server did not close: %v", r)
	}
}

// runFor steps until virtual time at (or until the network is idle).
func (r *twRPC) runFor(at Time) {
	for r.now < at && r.step() {
	}
}

// atMostOnce checks that the server accepted the connection once and read
// the request once, and that the dialer got the whole response.
func (r *twRPC) atMostOnce(t *testing.T) {
	t.Helper()
	srv := r.hosts[1]
	if st := srv.ep.Stats(); len(srv.accepted) != 1 || st.ConnsOpened != 1 {
		t.Fatalf("server accepted %d connections (ConnsOpened %d): the request was delivered %d times",
			len(srv.accepted), st.ConnsOpened, len(srv.accepted))
	}
	if !bytes.Equal(srv.got(srv.accepted[0]), r.req) {
		t.Fatal("request corrupted")
	}
	if !bytes.Equal(r.hosts[0].got(r.h), r.resp) || !r.hosts[0].eof[r.h] {
		t.Fatalf("dialer got %d of %d response bytes (EOF %v)", len(r.hosts[0].got(r.h)), len(r.resp), r.hosts[0].eof[r.h])
	}
}

func frameType(b []byte) (PacketType, Flags) {
	var f Frame
	if ParseFrame(b, &f) != nil {
		return 0, 0
	}
	return f.Header.Type, f.Header.Flags
}

// The request's ACKs are late (2 s, five times the time-wait), the
// response is not: the server closes at once and the dialer keeps resending
// its request, whose copies reach the server's time-wait entry for far
// longer than TimeWait. The entry lives on while the peer keeps sending (a
// copy at least every probe interval), so no copy opens the connection a
// second time, and the dialer finishes cleanly when the ACKs arrive.
func TestTimeWaitOutlivesLateRequestACKs(t *testing.T) {
	r := newTWRPC(t)
	late := Time(2 * time.Second)
	r.delay = func(from, _ int, b []byte) Time {
		if typ, _ := frameType(b); from == 1 && typ == TypeAck {
			return late
		}
		return 0
	}
	r.call(t)
	r.runFor(r.now + late + Time(time.Second))
	r.atMostOnce(t)
	if _, ok := r.hosts[0].closed[r.h]; !ok {
		t.Fatalf("dialer not closed: %v", r)
	}
	if err := r.hosts[0].closed[r.h]; err != nil {
		t.Fatalf("dialer closed with %v", err)
	}
	if st := r.hosts[1].ep.Stats(); st.TimeWaitRejects == 0 || st.ResetsOut != 0 {
		t.Fatalf("server: %d frames at time-wait, %d RESETs out", st.TimeWaitRejects, st.ResetsOut)
	}
}

// The request's ACKs are lost and then the dialer's direction fails for
// longer than the server's time-wait, right after the dialer got the whole
// response. The dialer's resends after the outage find no state at the
// server. They must not open the connection again: a dialer that heard its
// peer (the response) sends no more SYN, so the server answers RESET and the
// dialer's connection fails on its own, the request delivered once.
func TestOutageLongerThanTimeWaitNoReopen(t *testing.T) {
	r := newTWRPC(t)
	var downFrom, downUntil Time
	heard, synAfter := false, 0 // SYN frames the dialer sent after it heard the response
	r.middle = func(from, _ int, b []byte) ([]byte, bool) {
		typ, flags := frameType(b)
		if from == 1 && typ == TypeAck {
			return b, false
		}
		if from == 0 && heard && flags&FlagSYN != 0 {
			synAfter++
		}
		return b, !(from == 0 && r.now >= downFrom && r.now < downUntil)
	}
	r.writeAll(0, r.h, r.req, true)
	srv := r.hosts[1]
	if !r.run(1_000_000, func() bool { return len(srv.accepted) > 0 && srv.eof[srv.accepted[0]] }) {
		t.Fatalf("request not read: %v", r)
	}
	r.writeAll(1, srv.accepted[0], r.resp, true)
	if !r.run(1_000_000, func() bool { return r.hosts[0].eof[r.h] }) {
		t.Fatalf("response not read: %v", r)
	}
	// the dialer's ACK of the response is on its way: the outage starts
	// behind it and outlasts the server's time-wait
	heard = true
	downFrom, downUntil = r.now+r.latency, r.now+Time(srv.ep.cfg.TimeWait)+Time(200*time.Millisecond)
	r.runFor(downUntil + Time(time.Second))
	r.atMostOnce(t)
	if st := r.hosts[0].ep.Stats(); synAfter != 0 || st.Retransmits == 0 {
		t.Fatalf("dialer resent %d packets, %d with SYN after it heard the response", st.Retransmits, synAfter)
	}
	if err, ok := r.hosts[0].closed[r.h]; !ok || !errors.Is(err, ErrConnReset) {
		t.Fatalf("dialer closed %v with %v, want ErrConnReset", ok, err)
	}
}

// The response's ACKs are late (2 s): the dialer has everything and closes
// at once, the server keeps resending its response and then probing. The
// dialer's time-wait entry lives on while those frames keep coming and
// re-ACKs them; none gets a RESET, and the server closes cleanly when the
// ACKs arrive.
func TestTimeWaitOutlivesLateResponseACKs(t *testing.T) {
	r := newTWRPC(t)
	late := Time(2 * time.Second)
	r.delay = func(from, _ int, b []byte) Time {
		if typ, _ := frameType(b); from == 0 && typ == TypeAck {
			return late
		}
		return 0
	}
	r.writeAll(0, r.h, r.req, true)
	srv := r.hosts[1]
	if !r.run(1_000_000, func() bool { return len(srv.accepted) > 0 && srv.eof[srv.accepted[0]] }) {
		t.Fatalf("request not read: %v", r)
	}
	r.writeAll(1, srv.accepted[0], r.resp, true)
	r.runFor(r.now + late + Time(time.Second))
	r.atMostOnce(t)
	err, ok := srv.closed[srv.accepted[0]]
	if !ok || err != nil {
		t.Fatalf("server closed %v with %v: %v", ok, err, r)
	}
	if st := r.hosts[0].ep.Stats(); st.ResetsOut != 0 || st.TimeWaitRejects == 0 {
		t.Fatalf("dialer: %d RESETs out, %d frames at time-wait", st.ResetsOut, st.TimeWaitRejects)
	}
}

// A keepalive that reaches a cleanly closed time-wait entry is answered
// like one that reaches the connection (an ACK with FlagProbe): the prober,
// whose last ACKs were lost, resumes and resends what it has queued, which
// the entry re-ACKs, instead of probing on until its user timeout.
func TestTimeWaitAnswersKeepalive(t *testing.T) {
	n := newTestNet(t, 5, Config{}, Config{})
	var srvFrame []byte
	n.middle = func(from, _ int, b []byte) ([]byte, bool) {
		if from == 1 && srvFrame == nil {
			srvFrame = append([]byte(nil), b...)
		}
		return b, true
	}
	runExchange(t, n, 3000, 2000)
	cli := n.hosts[0].ep
	var f Frame
	if err := ParseFrame(srvFrame, &f); err != nil {
		t.Fatal(err)
	}
	f.Header.Type, f.Header.Flags, f.Payload = TypePull, FlagProbe, nil
	buf := make([]byte, 200)
	k, err := BuildFrame(buf, &f)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.HandleFrame(buf[:k], n.now+us); !errors.Is(err, ErrTimeWait) {
		t.Fatalf("keepalive at time-wait: %v", err)
	}
	out := poll(t, cli, n.now+us, true)
	if len(out) != 1 || out[0].f.Header.Type != TypeAck || out[0].f.Header.Flags&FlagProbe == 0 {
		t.Fatalf("answer to a keepalive at a clean time-wait: %+v", out)
	}
	// a PULL that is not a keepalive is still ignored
	f.Header.Flags = 0
	k, _ = BuildFrame(buf, &f)
	cli.HandleFrame(buf[:k], n.now+us)
	if out := poll(t, cli, n.now+us, true); len(out) != 0 {
		t.Fatalf("answer to a PULL at a clean time-wait: %+v", out)
	}
}

// A refreshed entry outlives its first expiry in its one slot (moved to the
// tail when that expiry comes), entries around it expire on time, and a
// full ring keeps rotating.
func TestTimeWaitRefresh(t *testing.T) {
	key := func(i uint32) connKey { return connKey{remoteIP: 1, remotePort: 2, localPort: 3, connID: i} }
	table := newKeyTable(4)
	tw := newTimeWait(4, &table)
	lookup := func(k connKey) (*twEntry, bool) {
		v, ok := table.get(k)
		if !ok || v >= 0 {
			return nil, false
		}
		return tw.entry(v), true
	}
	const d = 100 * ms
	tw.add(key(1), d, twClosed, 0)
	tw.add(key(2), 10*ms+d, twClosed, 0)
	e, _ := lookup(key(1))
	tw.refresh(e, 90*ms+d) // a late frame at 90 ms
	e, _ = lookup(key(1))
	tw.refresh(e, 50*ms+d) // never shortens
	tw.expire(d)
	if _, ok := lookup(key(1)); !ok || tw.Len() != 2 {
		t.Fatalf("refreshed entry gone at its first expiry (len %d)", tw.Len())
	}
	if at, _ := tw.next(); at != 10*ms+d {
		t.Fatalf("next expiry %v, want key 2's", at)
	}
	tw.expire(10*ms + d)
	if _, ok := lookup(key(2)); ok || tw.Len() != 1 {
		t.Fatal("key 2 outlived its expiry")
	}
	tw.expire(90*ms + d - 1)
	if _, ok := lookup(key(1)); !ok {
		t.Fatal("refreshed entry gone early")
	}
	tw.expire(90*ms + d)
	if _, ok := lookup(key(1)); ok || tw.Len() != 0 {
		t.Fatal("refreshed entry outlived its refresh")
	}
	// full ring: a refreshed entry moves to the tail in place of itself
	for i := uint32(10); i < 14; i++ {
		tw.add(key(i), 200*ms+d+Time(i), twClosed, 0)
	}
	e, _ = lookup(key(10))
	tw.refresh(e, 400*ms+d)
	tw.expire(200*ms + d + 12)
	if tw.Len() != 2 {
		t.Fatalf("len %d, want 2 (keys 10 and 13)", tw.Len())
	}
	for _, k := range []uint32{10, 13} {
		if _, ok := lookup(key(k)); !ok {
			t.Fatalf("key %d missing", k)
		}
	}
	if tw.add(key(20), 300*ms, twClosed, 0) || tw.add(key(21), 300*ms, twClosed, 0) {
		t.Fatal("evicted with room left")
	}
	if !tw.add(key(22), 300*ms, twClosed, 0) {
		t.Fatal("full ring did not evict")
	}
	if _, ok := lookup(key(13)); ok {
		t.Fatal("the oldest entry (key 13, after key 10 moved to the tail) was not the one evicted")
	}
}

// closingRPC runs one request/response between endpoints that call
// HandleIdle (as the engine does), up to the dialer's HandleFrame of the
// response: the dialer's connection is then finished, its close pending.
// It returns the dialer's handle and the response's frames.
func closingRPC(t *testing.T, a, b *Endpoint, now Time) (Handle, []rec) {
	t.Helper()
	a.HandleIdle(now)
	b.HandleIdle(now)
	h, err := a.Dial(addrOf(b, 80), DialOptions{}, now)
	if err != nil {
		t.Fatal(err)
	}
	a.Write(h, []byte("request"), now)
	a.CloseWrite(h, now)
	deliver(t, b, now, poll(t, a, now, true)...)
	ev, ok := findEvent(events(b), EventAccepted)
	if !ok {
		t.Fatal("request not accepted")
	}
	b.Write(ev.Handle, []byte("response"), now)
	b.CloseWrite(ev.Handle, now)
	resp := poll(t, b, now, true)
	deliver(t, a, now, resp...)
	return h, resp
}

// A host that calls HandleIdle gets a clean close after the frame that
// finished the connection, at its next timer check (NextTimer reports it
// due at once) or idle call, not inside that frame's HandleFrame. Until
// then the connection answers as its time-wait entry would: a duplicate of
// the response is re-ACKed, an Abort sends no RESET, a Release waits for
// the close; then the time-wait entry takes over.
func TestTimeWaitCloseWaitsForTimerCheck(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	now := Time(time.Millisecond)
	h, resp := closingRPC(t, a, b, now)
	buf := make([]byte, 64)
	if n, err := a.Read(h, buf); n != len("response") || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if _, err := a.Read(h, buf); err != io.EOF {
		t.Fatalf("read at the end: %v", err)
	}
	if st := a.Stats(); st.ConnsClosed != 0 || st.TimeWaitActive != 0 {
		t.Fatalf("closed inside HandleFrame: %+v", st)
	}
	if _, ok := findEvent(events(a), EventClosed); ok {
		t.Fatal("EventClosed before the timer check")
	}
	if at, ok := a.NextTimer(); !ok || at > now {
		t.Fatalf("pending close not due: %v %v", at, ok)
	}
	poll(t, a, now, true) // the response's ACK
	deliver(t, a, now, ofType(resp, TypeData)...)
	if acks := ofType(poll(t, a, now, true), TypeAck); len(acks) == 0 {
		t.Fatal("a duplicate of the response was not re-ACKed while closing")
	}
	a.Release(h)
	if st := a.Stats(); st.ConnsActive != 1 {
		t.Fatalf("released before its close: %+v", st)
	}
	a.HandleTimers(now + us)
	if st := a.Stats(); st.ConnsClosed != 1 || st.TimeWaitActive != 1 || st.ConnsActive != 0 {
		t.Fatalf("after the timer check: %+v", st)
	}
	if _, ok := a.NextTimer(); ok {
		if at, _ := a.NextTimer(); at <= now+us {
			t.Fatalf("close still due at %v", at)
		}
	}
	if err := a.HandleFrame(ofType(resp, TypeData)[0].b, now+2*us); !errors.Is(err, ErrTimeWait) {
		t.Fatalf("duplicate after the close: %v", err)
	}
	if acks := ofType(poll(t, a, now+2*us, true), TypeAck); len(acks) != 1 {
		t.Fatalf("time-wait did not re-ACK: %d", len(acks))
	}

	// Abort while closing: the close stands clean (no RESET, and the
	// entry re-ACKs), as it did when the close came inside HandleFrame.
	now += Time(time.Millisecond)
	h2, resp2 := closingRPC(t, a, b, now)
	poll(t, a, now, true)
	a.Abort(h2, now)
	if rs := ofType(poll(t, a, now, true), TypeReset); len(rs) != 0 {
		t.Fatal("Abort of a finished connection sent a RESET")
	}
	if ev, ok := findEvent(events(a), EventClosed); !ok || ev.Err != nil {
		t.Fatalf("EventClosed %v with %v", ok, ev.Err)
	}
	a.HandleIdle(now) // nothing left pending
	deliver(t, a, now, ofType(resp2, TypeData)...)
	out := poll(t, a, now, true)
	if len(ofType(out, TypeAck)) != 1 || len(ofType(out, TypeReset)) != 0 {
		t.Fatalf("time-wait after Abort answered %+v", out)
	}
	if len(a.closing) != 0 {
		t.Fatalf("%d closes left pending", len(a.closing))
	}
}

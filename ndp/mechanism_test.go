package ndp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"
)

// dialWrite: A dials B:80 (listening) and writes n bytes.
func dialWrite(t *testing.T, a, b *Endpoint, n int, opts DialOptions) (Handle, []byte) {
	t.Helper()
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	h, err := a.Dial(addrOf(b, 80), opts, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(3, n)
	if k, err := a.Write(h, data, 0); err != nil || k != n {
		t.Fatalf("write %d %v", k, err)
	}
	return h, data
}

func TestZeroRTTPush(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	h, err := a.Dial(addrOf(b, 80), DialOptions{Size: 1 << 20, Deadline: 5 * ms, Priority: 0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rs := poll(t, a, 0, true); len(rs) != 0 {
		t.Fatalf("Dial sent %d frames; connect must only register", len(rs))
	}
	mss := a.MSS()
	a.Write(h, pattern(1, 100*mss), 0)
	rs := poll(t, a, 1*us, true)
	if len(rs) != a.cfg.IW {
		t.Fatalf("pushed %d packets, want IW=%d", len(rs), a.cfg.IW)
	}
	for i, r := range rs {
		hd := r.f.Header
		if hd.Type != TypeData || hd.Flags&FlagSYN == 0 || int(hd.SynOffset) != i || hd.Offset != uint64(i*mss) {
			t.Fatalf("packet %d: %+v", i, hd)
		}
		if hd.FlowSize != 1<<20 || hd.DeadlineUS != 4999 {
			t.Fatalf("packet %d: D3 hints %d %d", i, hd.FlowSize, hd.DeadlineUS)
		}
		if hd.Flags&FlagLast != 0 {
			t.Fatalf("packet %d marked LAST with more data available", i)
		}
	}
	// a small write pushes a single packet marked LAST
	a2 := mkEP(t, [4]byte{10, 0, 0, 3}, nil)
	h2, _ := a2.Dial(addrOf(b, 80), DialOptions{}, 0)
	a2.Write(h2, []byte("hi"), 0)
	rs = poll(t, a2, 0, true)
	if len(rs) != 1 || rs[0].f.Header.Flags&(FlagLast|FlagSYN) != FlagLast|FlagSYN {
		t.Fatalf("small write: %d frames %+v", len(rs), rs)
	}
}

func TestAnyFirstPacketOpens(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	_, data := dialWrite(t, a, b, 10*a.MSS(), DialOptions{})
	rs := poll(t, a, 0, true)
	// deliver in reverse: the last packet (offset 9) opens the connection
	for i := len(rs) - 1; i >= 0; i-- {
		deliver(t, b, 10*us, rs[i])
	}
	evs := events(b)
	acc, ok := findEvent(evs, EventAccepted)
	if !ok {
		t.Fatal("no EventAccepted")
	}
	n := 0
	for _, e := range evs {
		if e.Kind == EventAccepted {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d accepts", n)
	}
	got := make([]byte, len(data)+10)
	k, _ := b.Read(acc.Handle, got)
	if !bytes.Equal(got[:k], data) {
		t.Fatalf("read %d bytes, mismatch", k)
	}
	if acks := ofType(poll(t, b, 10*us, true), TypeAck); len(acks) != 10 {
		t.Fatalf("%d ACKs for 10 packets", len(acks))
	}
}

func TestNackQueuesButPullSends(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	dialWrite(t, a, b, 5*a.MSS(), DialOptions{})
	rs := poll(t, a, 0, true)
	if _, err := TrimFrame(rs[2].b); err != nil {
		t.Fatal(err)
	}
	rs[2].b = rs[2].b[:HeaderOverhead]
	deliver(t, b, 10*us, rs...)
	out := poll(t, b, 10*us, true)
	acks, nacks := ofType(out, TypeAck), ofType(out, TypeNack)
	if len(acks) != 4 || len(nacks) != 1 || nacks[0].f.Header.Seq != rs[2].f.Header.Seq {
		t.Fatalf("acks %d nacks %d", len(acks), len(nacks))
	}
	if nacks[0].f.Header.PathID != rs[2].f.Header.PathID {
		t.Fatal("NACK does not echo the path id")
	}
	evs := events(b)
	// LAST (packet 4) arrived: pulls dropped, one pull re-issued for the trimmed packet
	if c := countPulls(evs); c < 1 {
		t.Fatalf("no pull for the trimmed header: %+v", evs)
	}
	deliver(t, a, 20*us, out...)
	if rtx := poll(t, a, 20*us, true); len(rtx) != 0 {
		t.Fatalf("NACK made the sender transmit %d frames; it must wait for a PULL", len(rtx))
	}
	if st := a.Stats(); st.NacksIn != 1 || st.AcksIn != 4 {
		t.Fatalf("stats %+v", st)
	}
	// the receiver's pull releases the retransmission
	var h Handle
	for _, e := range evs {
		if e.Kind == EventPulls {
			h = e.Handle
		}
	}
	b.PullReleased(h, 30*us)
	pulls := ofType(poll(t, b, 30*us, true), TypePull)
	if len(pulls) != 1 || pulls[0].f.Header.PullCounter != 1 {
		t.Fatalf("pull frames %+v", pulls)
	}
	deliver(t, a, 40*us, pulls...)
	rtx := poll(t, a, 40*us, true)
	if len(rtx) != 1 || rtx[0].f.Header.Seq != rs[2].f.Header.Seq || rtx[0].pushed {
		t.Fatalf("retransmission %+v", rtx)
	}
	if rtx[0].f.Header.PathID == rs[2].f.Header.PathID && a.cfg.Paths > 1 {
		t.Fatal("retransmission on the same path")
	}
}

func TestPullCounterAndRtxFirst(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	mss := a.MSS()
	h, data := dialWrite(t, a, b, 100*mss, DialOptions{})
	_ = h
	rs := poll(t, a, 0, true)
	if len(rs) != 30 {
		t.Fatalf("%d pushed", len(rs))
	}
	// trim packet 0, deliver all
	TrimFrame(rs[0].b)
	rs[0].b = rs[0].b[:HeaderOverhead]
	deliver(t, b, 10*us, rs...)
	evs := events(b)
	if c := countPulls(evs); c != 30 {
		t.Fatalf("receiver asked for %d pulls, want one per arrival (30)", c)
	}
	acc, _ := findEvent(evs, EventAccepted)
	ctl := poll(t, b, 10*us, true)
	deliver(t, a, 20*us, ctl...) // ACKs + NACK
	for i := 0; i < 3; i++ {
		b.PullReleased(acc.Handle, 30*us)
	}
	pulls := ofType(poll(t, b, 30*us, true), TypePull)
	if len(pulls) != 3 {
		t.Fatalf("%d pulls", len(pulls))
	}
	// the third PULL overtakes the others: counter jumps 0 -> 3
	deliver(t, a, 40*us, pulls[2])
	out := poll(t, a, 40*us, true)
	if len(out) != 3 {
		t.Fatalf("counter advanced by 3, sender sent %d", len(out))
	}
	if out[0].f.Header.Seq != rs[0].f.Header.Seq {
		t.Fatal("retransmission not sent first")
	}
	for i, r := range out[1:] {
		if r.f.Header.Offset != uint64((30+i)*mss) || r.f.Header.Flags&FlagSYN != 0 {
			t.Fatalf("new data %d: %+v", i, r.f.Header)
		}
	}
	// stale PULLs arriving late pull nothing
	deliver(t, a, 50*us, pulls[0], pulls[1])
	if late := poll(t, a, 50*us, true); len(late) != 0 {
		t.Fatalf("stale pulls sent %d", len(late))
	}
	_ = data
}

func TestLastDropsPullsAndPushAgain(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	h, _ := dialWrite(t, a, b, 3*a.MSS(), DialOptions{})
	rs := poll(t, a, 0, true)
	if rs[2].f.Header.Flags&FlagLast == 0 || rs[0].f.Header.Flags&FlagLast != 0 {
		t.Fatal("LAST must be on the last packet of available data only")
	}
	deliver(t, b, 10*us, rs[0], rs[1])
	evs := events(b) // hand the two pulls to the "pull queue"
	if countPulls(evs) != 2 {
		t.Fatalf("pulls %d", countPulls(evs))
	}
	deliver(t, b, 11*us, rs[2])
	evs = events(b)
	if _, ok := findEvent(evs, EventDropPulls); !ok {
		t.Fatalf("no EventDropPulls on LAST: %+v", evs)
	}
	if countPulls(evs) != 0 {
		t.Fatal("pulls issued after LAST with nothing owed")
	}
	deliver(t, a, 20*us, poll(t, b, 20*us, true)...)
	// new data after LAST is pushed without any PULL
	a.Write(h, pattern(9, 2*a.MSS()), 30*us)
	out := poll(t, a, 30*us, true)
	if len(out) != 2 || out[0].f.Header.Flags&FlagSYN != 0 || out[1].f.Header.Flags&FlagLast == 0 {
		t.Fatalf("push after LAST: %d frames", len(out))
	}
}

func TestRTORetransmitOnOtherPath(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	dialWrite(t, a, b, 3*a.MSS(), DialOptions{})
	rs := poll(t, a, 0, true)
	deliver(t, b, 10*us, rs[0], rs[2]) // rs[1] lost for real
	deliver(t, a, 20*us, poll(t, b, 20*us, true)...)
	at, ok := a.NextTimer()
	if !ok || at != Time(a.cfg.RTO) {
		t.Fatalf("RTO timer %v %v", at, ok)
	}
	a.HandleTimers(at - 1)
	if out := poll(t, a, at-1, true); len(out) != 0 {
		t.Fatal("retransmitted before RTO")
	}
	a.HandleTimers(at)
	out := poll(t, a, at, true)
	if len(out) != 1 || out[0].f.Header.Seq != rs[1].f.Header.Seq || !bytes.Equal(out[0].f.Payload, rs[1].f.Payload) {
		t.Fatalf("RTO retransmission: %+v", out)
	}
	if out[0].f.Header.PathID == rs[1].f.Header.PathID {
		t.Fatal("RTO retransmission on the same path")
	}
	if st := a.Stats(); st.RTOFires != 1 || st.Retransmits != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTimeoutWhenPeerSilent(t *testing.T) {
	a, b := mkEP(t, ipA, func(c *Config) { c.UserTimeout = time.Second }), mkEP(t, ipB, nil)
	h, _ := dialWrite(t, a, b, 10, DialOptions{})
	now := Time(0)
	for i := 0; i < 1000 && a.Stats().UserTimeouts == 0; i++ {
		poll(t, a, now, true) // everything is lost
		at, ok := a.NextTimer()
		if !ok {
			break
		}
		now = at
		a.HandleTimers(now)
	}
	ev, ok := findEvent(events(a), EventClosed)
	if !ok || !errors.Is(ev.Err, ErrTimeout) {
		t.Fatalf("closed event %+v %v", ev, ok)
	}
	if _, err := a.Write(h, []byte("x"), now); !errors.Is(err, ErrTimeout) {
		t.Fatalf("write after timeout: %v", err)
	}
	// silent from the dial at 0: the user timeout counts from there
	if now != Time(time.Second) {
		t.Fatalf("gave up at %v, want the user timeout 1s", time.Duration(now))
	}
	// RTO rounds until probing starts (half the user timeout), then
	// keepalives every 250ms: a handful of frames, not a window every RTO
	// (the keepalives resend a first-RTT packet, each lost again: one more
	// RTO fire per keepalive)
	if st := a.Stats(); st.RTOFires > 20+st.SilenceProbes || st.SilenceProbes < 2 || st.SilenceProbes > 6 || st.UserTimeouts != 1 {
		t.Fatalf("RTO fires %d, keepalives %d, user timeouts %d", st.RTOFires, st.SilenceProbes, st.UserTimeouts)
	}
}

func TestRefusedAndReset(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	h, _ := a.Dial(addrOf(b, 81), DialOptions{}, 0) // nobody listens on 81
	a.Write(h, []byte("hello"), 0)
	deliver(t, b, 1*us, poll(t, a, 0, true)...)
	rst := poll(t, b, 1*us, true)
	if len(rst) != 1 || rst[0].f.Header.Type != TypeReset || rst[0].f.Header.Code != ResetRefused {
		t.Fatalf("answer to SYN on closed port: %+v", rst)
	}
	deliver(t, a, 2*us, rst...)
	ev, ok := findEvent(events(a), EventClosed)
	if !ok || !errors.Is(ev.Err, ErrConnRefused) {
		t.Fatalf("dialer: %+v", ev)
	}
	if _, err := a.Read(h, make([]byte, 10)); !errors.Is(err, ErrConnRefused) {
		t.Fatalf("read: %v", err)
	}
	if st := b.Stats(); st.Refused != 1 {
		t.Fatalf("refused %d", st.Refused)
	}
}

func TestAbortAndQuench(t *testing.T) {
	for _, tc := range []struct {
		name            string
		quench          bool
		local, remote   error
		abortAtListener bool
	}{
		{"abort-dialer", false, ErrClosed, ErrConnReset, false},
		{"abort-listener", false, ErrClosed, ErrConnReset, true},
		{"quench-listener", true, ErrDeadlineUnmeetable, ErrDeadlineUnmeetable, true},
		{"quench-dialer", true, ErrDeadlineUnmeetable, ErrDeadlineUnmeetable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
			ha, _ := dialWrite(t, a, b, 100*a.MSS(), DialOptions{Deadline: ms})
			pushed := poll(t, a, 0, true)
			deliver(t, b, 1*us, pushed...)
			acc, _ := findEvent(events(b), EventAccepted)
			hb := acc.Handle
			b.PullReleased(hb, 1*us)
			earlyPull := ofType(poll(t, b, 1*us, true), TypePull)[0].b
			x, hx, y := a, ha, b
			if tc.abortAtListener {
				x, hx, y = b, hb, a
			}
			if tc.quench {
				x.Quench(hx, 2*us)
			} else {
				x.Abort(hx, 2*us)
			}
			ev, _ := findEvent(events(x), EventClosed)
			if !errors.Is(ev.Err, tc.local) {
				t.Fatalf("local close %v", ev.Err)
			}
			out := poll(t, x, 2*us, true)
			resets := ofType(out, TypeReset)
			if len(resets) != 1 {
				t.Fatalf("%d resets", len(resets))
			}
			deliver(t, y, 3*us, resets...)
			ev, ok := findEvent(events(y), EventClosed)
			if !ok || !errors.Is(ev.Err, tc.remote) {
				t.Fatalf("remote close %+v", ev)
			}
			// a late frame for the aborted connection gets a RESET again
			var late []byte
			if tc.abortAtListener {
				late = pushed[len(pushed)-1].b // a duplicate of the dialer's DATA
			} else {
				late = earlyPull // the listener's pull, crossing the RESET
			}
			if err := x.HandleFrame(late, 4*us); !errors.Is(err, ErrTimeWait) {
				t.Fatalf("late frame: %v", err)
			}
			if again := ofType(poll(t, x, 4*us, true), TypeReset); len(again) != 1 {
				t.Fatalf("late frame for aborted connection: %d resets", len(again))
			}
		})
	}
}

func TestTimeWaitRejectsReplay(t *testing.T) {
	n := newTestNet(t, 5, Config{}, Config{})
	// capture each side's first SYN frame
	var firstSyn, srvSyn []byte
	n.middle = func(from, to int, b []byte) ([]byte, bool) {
		var f Frame
		if ParseFrame(b, &f) == nil && f.Header.Flags&FlagSYN != 0 {
			if firstSyn == nil && from == 0 {
				firstSyn = append([]byte(nil), b...)
			}
			if srvSyn == nil && from == 1 {
				srvSyn = append([]byte(nil), b...)
			}
		}
		return b, true
	}
	runExchange(t, n, 5000, 3000)
	srv := n.hosts[1].ep
	before := srv.Stats()
	if before.TimeWaitActive != 1 {
		t.Fatalf("server time-wait entries %d", before.TimeWaitActive)
	}
	// the closed connection's table entry became its time-wait entry: one
	// entry, a ring slot, not a connection slot
	var syn Frame
	if err := ParseFrame(firstSyn, &syn); err != nil {
		t.Fatal(err)
	}
	key := connKey{remoteIP: binary.BigEndian.Uint32(syn.SrcIP[:]), remotePort: syn.Header.SrcPort, localPort: syn.Header.DstPort, connID: syn.Header.ConnID}
	if v, ok := srv.table.get(key); !ok || v >= 0 || srv.table.n != 1 {
		t.Fatalf("server table: key value %d present %v, %d entries; want one time-wait entry", v, ok, srv.table.n)
	}
	err := srv.HandleFrame(firstSyn, n.now+us)
	if !errors.Is(err, ErrTimeWait) {
		t.Fatalf("replayed SYN: %v", err)
	}
	after := srv.Stats()
	if after.ConnsOpened != before.ConnsOpened || after.TimeWaitRejects != before.TimeWaitRejects+1 {
		t.Fatalf("replay opened a connection: %+v", after)
	}
	if _, ok := findEvent(events(srv), EventAccepted); ok {
		t.Fatal("EventAccepted for a replayed SYN")
	}
	// the replay is re-ACKed (the peer may have lost our ACK), not delivered
	if out := poll(t, srv, n.now+us, true); len(out) != 1 || out[0].f.Header.Type != TypeAck {
		t.Fatalf("answer to replay: %+v", out)
	}
	// the dialer rejects a replay of the server's SYN too (time-wait at both ends)
	cli := n.hosts[0].ep
	if cli.Stats().TimeWaitActive != 1 {
		t.Fatal("dialer has no time-wait entry")
	}
	if err := cli.HandleFrame(srvSyn, n.now+us); !errors.Is(err, ErrTimeWait) {
		t.Fatalf("dialer accepted a replay of the server's first packet: %v", err)
	}
	if cli.Readable(n.hosts[0].events[0].Handle) != 0 {
		t.Fatal("replayed data delivered")
	}
	// after time-wait expires the entry is gone
	srv.HandleTimers(n.now + Time(srv.cfg.TimeWait) + ms)
	if srv.Stats().TimeWaitActive != 0 || srv.table.n != 0 {
		t.Fatalf("time-wait did not expire: %d entries, %d in the table", srv.Stats().TimeWaitActive, srv.table.n)
	}
}

func TestUnknownConnectionFrames(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	h, _ := dialWrite(t, a, b, 10, DialOptions{})
	rs := poll(t, a, 0, true)
	mk := func(typ PacketType, flags Flags) []byte {
		f := rs[0].f
		f.Header.Type, f.Header.Flags = typ, flags
		f.Header.ConnID ^= 0x5555 // unknown connection
		f.Payload = nil
		buf := make([]byte, 200)
		k, _ := BuildFrame(buf, &f)
		return buf[:k]
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		reply PacketType // 0 = no reply
		code  ResetCode
	}{
		{"pull", mk(TypePull, 0), TypeReset, ResetAbort},
		{"data-no-syn", mk(TypeData, 0), TypeReset, ResetAbort},
		{"ack", mk(TypeAck, 0), 0, 0},
		{"nack", mk(TypeNack, 0), 0, 0},
		{"reset", mk(TypeReset, 0), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.HandleFrame(tc.frame, us)
			if !errors.Is(err, ErrUnknownConn) {
				t.Fatalf("err %v", err)
			}
			out := poll(t, b, us, true)
			if tc.reply == 0 {
				if len(out) != 0 {
					t.Fatalf("unexpected reply %+v", out[0].f.Header)
				}
				return
			}
			if len(out) != 1 || out[0].f.Header.Type != tc.reply || out[0].f.Header.Code != tc.code {
				t.Fatalf("reply %+v", out)
			}
		})
	}
	_ = h
	// a PULL for a connection in time-wait (clean close) is ignored
}

func TestFlowControl(t *testing.T) {
	cfg := Config{RecvBuffer: 32 << 10}
	n := newTestNet(t, 9, Config{}, cfg)
	n.hosts[1].autoRead = false
	srv := n.hosts[1].ep
	srv.Listen(80)
	c, _ := n.hosts[0].ep.Dial(n.addr(1, 80), DialOptions{}, 0)
	data := pattern(4, 300<<10)
	off, _ := n.hosts[0].ep.Write(c, data, 0)
	// run 30ms of virtual time with a reader that does not read
	for n.now < 30*ms && n.step() {
		if k, _ := n.hosts[0].ep.Write(c, data[off:], n.now); k > 0 {
			off += k
		}
	}
	s := n.hosts[1].accepted[0]
	buffered := srv.Readable(s)
	if buffered > cfg.RecvBuffer || buffered < cfg.RecvBuffer-2*srv.MSS() {
		t.Fatalf("buffered %d with RecvBuffer %d", buffered, cfg.RecvBuffer)
	}
	st := srv.Stats()
	t.Logf("blocked receiver after 30ms: buffered=%d pullsOut=%d noBufferNacks=%d stalls(sender)=%d", buffered, st.PullsOut, st.NoBufferNacks, n.hosts[0].ep.Stats().StallProbes)
	if st.PullsOut > uint64(cfg.RecvBuffer/srv.MSS()+40) {
		t.Fatalf("receiver kept pulling into a full buffer: %d pulls", st.PullsOut)
	}
	// reader drains: everything arrives
	n.hosts[1].autoRead = true
	n.readAll(n.hosts[1], s)
	for i := 0; off < len(data) || !n.hosts[1].eof[s]; i++ {
		if off < len(data) {
			k, _ := n.hosts[0].ep.Write(c, data[off:], n.now)
			off += k
			if off == len(data) {
				n.hosts[0].ep.CloseWrite(c, n.now)
			}
		}
		if !n.step() || i > 1_000_000 {
			t.Fatalf("stuck: %v", n)
		}
	}
	if !bytes.Equal(n.hosts[1].got(s), data) {
		t.Fatal("data corrupted under flow control")
	}
}

func TestD3HintsAndPriority(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	now := Time(100 * us)
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	h, _ := a.Dial(addrOf(b, 80), DialOptions{Size: 12345, Deadline: now + 2*ms, Priority: 3}, now)
	a.Write(h, pattern(1, 5*a.MSS()), now)
	rs := poll(t, a, now, true)
	for _, r := range rs {
		if r.f.Header.Flags&FlagPriority == 0 || r.f.Header.Priority != 3 || !FramePriority(r.b) {
			t.Fatal("priority not carried")
		}
	}
	deliver(t, b, now+10*us, rs[0])
	evs := events(b)
	acc, _ := findEvent(evs, EventAccepted)
	if acc.Size != 12345 || acc.Priority != 3 || acc.Deadline != now+10*us+2*ms {
		t.Fatalf("accepted hints %+v", acc)
	}
	p, ok := findEvent(evs, EventPulls)
	if !ok || p.Size != 12345 || p.Priority != 3 || p.Deadline != acc.Deadline {
		t.Fatalf("pull hints %+v", p)
	}
	b.PullReleased(acc.Handle, now+20*us)
	pull := ofType(poll(t, b, now+20*us, true), TypePull)
	if len(pull) != 1 || pull[0].f.Header.Flags&FlagPriority == 0 {
		t.Fatal("PULL of a priority flow lacks the priority flag")
	}
}

func TestPacedPushHeldBack(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	h, _ := dialWrite(t, a, b, 40*a.MSS(), DialOptions{Paced: true})
	if out := poll(t, a, 0, false); len(out) != 0 {
		t.Fatalf("allowPush=false released %d pushed frames", len(out))
	}
	out := poll(t, a, 0, true)
	if len(out) != 30 {
		t.Fatalf("%d frames", len(out))
	}
	for _, r := range out {
		if !r.pushed || r.f.Header.Flags&FlagPaced == 0 {
			t.Fatal("pushed frame of a paced connection not reported as pushed")
		}
	}
	deliver(t, b, us, out...)
	acc, _ := findEvent(events(b), EventAccepted)
	deliver(t, a, 2*us, poll(t, b, us, true)...)
	b.PullReleased(acc.Handle, 3*us)
	deliver(t, a, 4*us, poll(t, b, 3*us, true)...)
	pulled := poll(t, a, 4*us, false)
	if len(pulled) != 1 || pulled[0].pushed {
		t.Fatalf("pulled data must flow with allowPush=false: %+v", pulled)
	}
	// an unpaced connection is not subject to the edge pacer
	a2 := mkEP(t, [4]byte{10, 0, 0, 3}, nil)
	h2, _ := a2.Dial(addrOf(b, 80), DialOptions{}, 0)
	a2.Write(h2, []byte("x"), 0)
	if o := poll(t, a2, 0, false); len(o) != 1 || o[0].pushed {
		t.Fatal("unpaced push held back or reported as pushed")
	}
	_ = h
}

func TestReadEOFAndRelease(t *testing.T) {
	n := newTestNet(t, 3, Config{}, Config{})
	runExchange(t, n, 100, 100)
	c := n.hosts[0].accepted
	_ = c
	cli := n.hosts[0].ep
	var h Handle
	for k := range n.hosts[0].closed {
		h = k
	}
	if _, err := cli.Read(h, make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after close: %v", err)
	}
	cli.Release(h)
	if _, err := cli.Read(h, make([]byte, 1)); !errors.Is(err, ErrInvalidHandle) {
		t.Fatalf("read after release: %v", err)
	}
	if cli.Stats().ConnsActive != 0 {
		t.Fatal("slot not freed")
	}
}

func TestTrimmedHeaderOpensAndDuplicates(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	_, data := dialWrite(t, a, b, 3*a.MSS(), DialOptions{})
	rs := poll(t, a, 0, true)
	hdr := rec{b: append([]byte(nil), rs[1].b...)}
	k, _ := TrimFrame(hdr.b)
	hdr.b = hdr.b[:k]
	deliver(t, b, us, hdr) // a trimmed first-RTT header opens the connection
	evs := events(b)
	acc, ok := findEvent(evs, EventAccepted)
	if !ok || countPulls(evs) != 1 {
		t.Fatalf("trimmed SYN header: accepted=%v pulls=%d", ok, countPulls(evs))
	}
	if nacks := ofType(poll(t, b, us, true), TypeNack); len(nacks) != 1 {
		t.Fatal("no NACK for the opening header")
	}
	deliver(t, b, 2*us, rs[0], rs[0], rs[2]) // a duplicate of packet 0
	evs = events(b)
	if _, again := findEvent(evs, EventAccepted); again {
		t.Fatal("duplicate opened a second connection")
	}
	if st := b.Stats(); st.DuplicatesIn != 1 || st.ConnsOpened != 1 {
		t.Fatalf("stats %+v", st)
	}
	if acks := ofType(poll(t, b, 2*us, true), TypeAck); len(acks) != 3 {
		t.Fatalf("%d ACKs (duplicates are re-ACKed)", len(acks))
	}
	// the retransmission of packet 1 completes the stream
	rtx := rs[1]
	deliver(t, b, 3*us, rtx)
	got := make([]byte, len(data))
	n, _ := b.Read(acc.Handle, got)
	if !bytes.Equal(got[:n], data) {
		t.Fatalf("read %d", n)
	}
}

func TestStallProbeRecoversLostPull(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	dialWrite(t, a, b, 2*a.MSS(), DialOptions{})
	rs := poll(t, a, 0, true)
	k, _ := TrimFrame(rs[0].b)
	rs[0].b = rs[0].b[:k]
	deliver(t, b, us, rs...)
	acc, _ := findEvent(events(b), EventAccepted)
	b.PullReleased(acc.Handle, us) // the pull queue sends the PULL ...
	ctl := poll(t, b, us, true)
	deliver(t, a, 2*us, append(ofType(ctl, TypeAck), ofType(ctl, TypeNack)...)...) // ... but it is lost
	if out := poll(t, a, 2*us, true); len(out) != 0 {
		t.Fatal("sent without pull")
	}
	want := 2*us + Time(a.cfg.StallTimeout)
	var at Time
	for i := 0; i < 100; i++ { // lazy RTO wake-ups may come first; they send nothing
		var ok bool
		if at, ok = a.NextTimer(); !ok || at > want {
			t.Fatalf("stall timer %v %v (want %v)", at, ok, want)
		}
		a.HandleTimers(at)
		if at == want {
			break
		}
		if out := poll(t, a, at, true); len(out) != 0 {
			t.Fatalf("sent at %v before the stall timeout", at)
		}
	}
	out := poll(t, a, at, true)
	if len(out) != 1 || out[0].f.Header.Seq != rs[0].f.Header.Seq || out[0].f.Header.Flags&FlagTrimmed == 0 || len(out[0].b) != HeaderOverhead {
		t.Fatalf("stall probe must be a header-only copy of the queued retransmission: %+v", out)
	}
	if a.Stats().StallProbes != 1 {
		t.Fatal("probe not counted")
	}
	// the receiver, whose PULL was lost, pulls again
	deliver(t, b, at+us, out...)
	if c := countPulls(events(b)); c != 1 {
		t.Fatalf("receiver issued %d pulls for the probe, want 1", c)
	}
	// a repeated probe while that pull is still queued adds none
	deliver(t, b, at+us, out...)
	if c := countPulls(events(b)); c != 0 {
		t.Fatalf("probe with a pull already queued issued %d pulls", c)
	}
	b.PullReleased(acc.Handle, at+us)
	deliver(t, a, at+2*us, ofType(poll(t, b, at+us, true), TypePull)...)
	rtx := poll(t, a, at+2*us, true)
	if len(rtx) != 1 || len(rtx[0].f.Payload) != a.MSS() {
		t.Fatalf("pulled retransmission %+v", rtx)
	}
}

func TestReleaseLingersUntilAcked(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	ha, _ := dialWrite(t, a, b, 100, DialOptions{})
	a.CloseWrite(ha, 0)
	deliver(t, b, us, poll(t, a, 0, true)...)
	acc, _ := findEvent(events(b), EventAccepted)
	hb := acc.Handle
	b.Read(hb, make([]byte, 200))
	b.Write(hb, []byte("response"), us)
	b.Release(hb) // read side done: closes the write side and lingers
	if _, err := b.Write(hb, []byte("x"), us); !errors.Is(err, ErrInvalidHandle) {
		t.Fatalf("handle still usable after Release: %v", err)
	}
	out := poll(t, b, us, true)
	data := ofType(out, TypeData)
	if len(data) != 1 || data[0].f.Header.Flags&FlagFIN == 0 {
		t.Fatalf("release did not send FIN: %+v", data)
	}
	deliver(t, a, 2*us, out...)
	if st := b.Stats(); st.ConnsActive != 1 {
		t.Fatal("freed before the peer acknowledged")
	}
	deliver(t, b, 3*us, poll(t, a, 2*us, true)...)
	if st := b.Stats(); st.ConnsActive != 0 || st.ConnsClosed != 1 {
		t.Fatalf("lingering connection not freed: %+v", st)
	}
	if evs := events(b); len(evs) != 0 {
		t.Fatalf("events for a released handle: %+v", evs)
	}
	// Release with unread peer data aborts
	a2 := mkEP(t, [4]byte{10, 0, 0, 3}, nil)
	h2, _ := a2.Dial(addrOf(b, 80), DialOptions{}, 3*us)
	a2.Write(h2, []byte("more to come"), 3*us)
	deliver(t, b, 4*us, poll(t, a2, 3*us, true)...)
	acc2, _ := findEvent(events(b), EventAccepted)
	b.Release(acc2.Handle)
	if r := ofType(poll(t, b, 4*us, true), TypeReset); len(r) != 1 {
		t.Fatal("release with the peer still sending must reset")
	}
}

// Out-of-order data filling the receive buffer must not block the pull
// that refills the hole in front of it (flow control vs. holes).
func TestFlowControlPullsHoleWhenFull(t *testing.T) {
	a := mkEP(t, ipA, nil)
	b := mkEP(t, ipB, func(c *Config) { c.RecvBuffer = 4 * MaxPayload(1500) })
	dialWrite(t, a, b, 8*a.MSS(), DialOptions{})
	rs := poll(t, a, 0, true)
	deliver(t, b, us, rs[1], rs[2], rs[3], rs[4]) // buffer now full, byte 0 missing
	evs := events(b)
	acc, _ := findEvent(evs, EventAccepted)
	for i := 0; i < countPulls(evs); i++ {
		b.PullReleased(acc.Handle, us)
	}
	poll(t, b, us, true) // those PULLs are lost
	if room := b.conn(acc.Handle).rcv.room(); room != 0 {
		t.Fatalf("room %d, want a full buffer", room)
	}
	hdr := rec{b: append([]byte(nil), rs[0].b...)}
	k, _ := TrimFrame(hdr.b)
	hdr.b = hdr.b[:k]
	deliver(t, b, 2*us, hdr)
	if c := countPulls(events(b)); c != 1 {
		t.Fatalf("hole in front of a full buffer got %d pulls, want 1", c)
	}
}

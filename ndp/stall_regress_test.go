package ndp

import (
	"testing"
)

// Tests for two deadlocks the liveness property test (TestLiveness) looks for:
// retransmissions in FIFO order, and a no-buffer packet at the head of the
// stream never counted as a hole (docs/decisions.md, "## ndp").

func TestSeqBitmap(t *testing.T) {
	var m seqBitmap
	if _, ok := m.lowest(5); ok {
		t.Fatal("empty bitmap has a lowest member")
	}
	base := uint32(1<<32 - 10) // the window wraps the 32-bit sequence space
	for _, s := range []uint32{base + 3, base + 700, base + 1023} {
		m.set(s)
	}
	for _, tc := range []struct{ from, want uint32 }{
		{base, base + 3},
		{base + 3, base + 3},
		{base + 4, base + 700},
		{base + 701, base + 1023},
		{base + 1023, base + 1023},
		{base + 1024, base + 3 + 1024}, // the same slot, one window later
	} {
		if got, ok := m.lowest(tc.from); !ok || got != tc.want {
			t.Errorf("lowest(base+%d) = base+%d %v, want base+%d", tc.from-base, got-base, ok, tc.want-base)
		}
	}
	if !m.has(base+700) || m.has(base+701) {
		t.Fatal("has")
	}
	if n := m.clearRange(base, 701); n != 2 || m.has(base+3) || m.has(base+700) || !m.has(base+1023) {
		t.Fatalf("clearRange cleared %d", n)
	}
	m.set(base + 64)
	m.set(base + 130)
	if n := m.clearRange(base+60, 1024); n != 3 {
		t.Fatalf("clearRange over the whole window cleared %d, want 3", n)
	}
	if _, ok := m.lowest(base); ok {
		t.Fatal("not empty after clearing everything")
	}
}

// The sender resends its lowest queued packet first, and the unsolicited
// credit an RTO grants goes to the packets the RTO declared lost. With a FIFO,
// the credit for a lost packet went to an earlier-queued one the peer had
// NACKed for lack of buffer (and NACKed again), and the stall probe kept
// probing that one: the lost packet, which the peer knew nothing of, was
// never sent again.
func TestRetransmitLowestFirstAndRTOCredit(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	h, _ := dialWrite(t, a, b, 3*a.MSS(), DialOptions{})
	rs := poll(t, a, 0, true)
	// P2 is trimmed (NACK queues it, a PULL will send it); P1 is ACKed; P0 is
	// lost without trace
	k, _ := TrimFrame(rs[2].b)
	rs[2].b = rs[2].b[:k]
	deliver(t, b, 10*us, rs[1], rs[2])
	ctl := poll(t, b, 10*us, true)
	if len(ofType(ctl, TypeNack)) != 1 {
		t.Fatalf("no NACK for the trimmed header")
	}
	deliver(t, a, 20*us, ctl...)
	at, _ := a.NextTimer()
	a.HandleTimers(at) // RTO: P0 lost
	out := poll(t, a, at, true)
	if len(out) != 1 || out[0].f.Header.Seq != rs[0].f.Header.Seq || out[0].f.Header.Flags&FlagPulled != 0 {
		t.Fatalf("the RTO's unsolicited resend must be P0 (seq %d), got %+v", rs[0].f.Header.Seq, seqs(out))
	}
	// the NACKed P2 waits for a PULL
	if c := a.conn(h); c.snd.rtxN != 1 || c.snd.urgN != 0 {
		t.Fatalf("queue %d urgent %d", c.snd.rtxN, c.snd.urgN)
	}

	// lowest first under pulls: P2 and P0 both trimmed, P2's NACK first; the
	// first PULL takes P0, and so does the stall probe
	a, b = mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	h, _ = dialWrite(t, a, b, 3*a.MSS(), DialOptions{})
	rs = poll(t, a, 0, true)
	for _, i := range []int{2, 0} {
		k, _ := TrimFrame(rs[i].b)
		rs[i].b = rs[i].b[:k]
	}
	deliver(t, b, 10*us, rs[2], rs[1], rs[0])
	evs := events(b)
	ctl = poll(t, b, 10*us, true)
	deliver(t, a, 20*us, ofType(ctl, TypeNack)...) // P2's NACK, then P0's
	if seq, ok := a.conn(h).snd.peekRtx(); !ok || seq != rs[0].f.Header.Seq {
		t.Fatalf("lowest queued %d %v, want P0 (%d)", seq, ok, rs[0].f.Header.Seq)
	}
	acc, _ := findEvent(evs, EventAccepted)
	b.PullReleased(acc.Handle, 30*us)
	deliver(t, a, 40*us, ofType(poll(t, b, 30*us, true), TypePull)...)
	out = poll(t, a, 40*us, true)
	if len(out) != 1 || out[0].f.Header.Seq != rs[0].f.Header.Seq || out[0].f.Header.Flags&FlagPulled == 0 {
		t.Fatalf("the pulled resend must be the lowest queued, P0 (%d): %v", rs[0].f.Header.Seq, seqs(out))
	}
}

func seqs(rs []rec) []uint32 {
	var out []uint32
	for _, r := range rs {
		out = append(out, r.f.Header.Seq)
	}
	return out
}

// A packet NACKed for lack of buffer becomes a hole once later data is
// stored: its bytes lie in space already held, so it is pulled although the
// buffer has no room for new data. Before, it stayed "no buffer": with the
// reader done up to it and the rest of the buffer taken by later data, its
// pull was owed forever (the stall probe was NACKed, no PULL ever went).
func TestNoBufferPacketBecomesHole(t *testing.T) {
	a := mkEP(t, ipA, nil)
	mss := a.MSS()
	b := mkEP(t, ipB, func(c *Config) { c.RecvBuffer = 3 * mss })
	dialWrite(t, a, b, 6*mss, DialOptions{})
	p := poll(t, a, 0, true) // P0..P5, pushed
	if len(p) != 6 {
		t.Fatalf("%d frames", len(p))
	}
	var hb Handle
	pulls := 0
	step := func(now Time) { // events; every PULL the host releases is lost
		for _, ev := range events(b) {
			switch ev.Kind {
			case EventAccepted:
				hb = ev.Handle
			case EventPulls:
				pulls += ev.Count
				for range ev.Count {
					b.PullReleased(ev.Handle, now)
				}
			}
		}
		poll(t, b, now, true) // ACKs, NACKs, PULLs: all lost
	}
	read := func(n int) {
		if k, _ := b.Read(hb, make([]byte, n)); k != n {
			t.Fatalf("read %d, want %d", k, n)
		}
	}
	deliver(t, b, us, p[0], p[1], p[2]) // buffer full
	step(us)
	deliver(t, b, 2*us, p[3]) // does not fit: NACKed, pull owed
	step(2 * us)
	if st := b.Stats(); st.NoBufferNacks != 1 {
		t.Fatalf("no-buffer NACKs %d", st.NoBufferNacks)
	}
	read(2 * mss) // room for two: the owed pull goes (and is lost)
	step(3 * us)
	deliver(t, b, 4*us, p[4]) // fits behind the missing P3
	step(4 * us)
	read(mss) // reader is at P3: everything before it read
	step(5 * us)
	deliver(t, b, 6*us, p[5]) // fills the buffer behind P3
	before := pulls
	step(6 * us)
	c := b.conn(hb)
	if c.rcv.room() >= mss {
		t.Fatalf("test setup: room %d", c.rcv.room())
	}
	if c.rcv.holes() != 1 {
		t.Fatalf("P3 must count as a hole once later data is stored: holes %d, no-buffer %d", c.rcv.holes(), c.rcv.nNoBuf)
	}
	// P3 is pulled although there is no room for new data
	if pulls == before && c.pullsPending+c.pullsHanded == 0 {
		// a probe of P3 (its PULLs were lost) must then bring a pull
		probe := p[3]
		k, _ := TrimFrame(probe.b)
		probe.b = probe.b[:k]
		deliver(t, b, 7*us, probe)
		step(7 * us)
	}
	if pulls == before {
		t.Fatalf("no pull for the missing head packet P3: owed %d, pending %d, handed %d, room %d",
			c.rcv.owedPulls, c.pullsPending, c.pullsHanded, c.rcv.room())
	}
}

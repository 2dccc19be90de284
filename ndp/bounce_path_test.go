package ndp

import (
	"testing"
)

func bounce(t *testing.T, r rec) rec {
	t.Helper()
	b := append([]byte(nil), r.b...)
	k, err := TrimFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	b = b[:k]
	if err := BounceFrame(b); err != nil {
		t.Fatal(err)
	}
	out := rec{b: b}
	if err := ParseFrame(b, &out.f); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReturnToSender(t *testing.T) {
	t.Run("no-pulls-expected-resend", func(t *testing.T) {
		a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
		dialWrite(t, a, b, 10, DialOptions{})
		rs := poll(t, a, 0, true)
		deliver(t, a, 5*us, bounce(t, rs[0]))
		out := poll(t, a, 5*us, true)
		if len(out) != 1 || out[0].f.Header.Seq != rs[0].f.Header.Seq || out[0].f.Header.Flags&FlagSYN == 0 {
			t.Fatalf("bounced lone packet not resent at once: %+v", out)
		}
		if st := a.Stats(); st.BouncedIn != 1 || st.BouncedResent != 1 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("pulls-expected-wait", func(t *testing.T) {
		a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
		dialWrite(t, a, b, 10*a.MSS(), DialOptions{})
		rs := poll(t, a, 0, true)
		deliver(t, b, 5*us, rs[:9]...)
		evs := events(b)
		acc, _ := findEvent(evs, EventAccepted)
		deliver(t, a, 10*us, poll(t, b, 5*us, true)...) // 9 ACKs: 9 PULLs are coming
		deliver(t, a, 11*us, bounce(t, rs[9]))
		if out := poll(t, a, 11*us, true); len(out) != 0 {
			t.Fatalf("resent although PULLs are expected (incast echo): %d", len(out))
		}
		if st := a.Stats(); st.BouncedResent != 0 {
			t.Fatal("counted as resent")
		}
		b.PullReleased(acc.Handle, 12*us)
		deliver(t, a, 13*us, ofType(poll(t, b, 12*us, true), TypePull)...)
		out := poll(t, a, 13*us, true)
		if len(out) != 1 || out[0].f.Header.Seq != rs[9].f.Header.Seq {
			t.Fatalf("pull did not fetch the bounced packet: %+v", out)
		}
	})
	t.Run("asymmetric-resend", func(t *testing.T) {
		a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
		dialWrite(t, a, b, 100*a.MSS(), DialOptions{})
		rs := poll(t, a, 0, true)
		deliver(t, b, 5*us, rs...)
		acc, _ := findEvent(events(b), EventAccepted)
		deliver(t, a, 10*us, poll(t, b, 5*us, true)...) // 30 ACKs, no NACK
		b.PullReleased(acc.Handle, 11*us)
		deliver(t, a, 12*us, ofType(poll(t, b, 11*us, true), TypePull)...)
		p := poll(t, a, 12*us, true)
		if len(p) != 1 {
			t.Fatalf("%d", len(p))
		}
		deliver(t, a, 13*us, bounce(t, p[0]))
		out := poll(t, a, 13*us, true)
		if len(out) != 1 || out[0].f.Header.Seq != p[0].f.Header.Seq || out[0].f.Header.PathID == p[0].f.Header.PathID {
			t.Fatalf("asymmetric network: bounced packet not resent on another path: %+v", out)
		}
	})
}

func TestScoreboardPermutesAndExcludes(t *testing.T) {
	r := &rng{s: 42}
	s := newScoreboard(8, 100)
	now := Time(1000)
	var excl uint64
	// every round visits each path exactly once
	for round := 0; round < 20; round++ {
		seen := map[uint16]bool{}
		for i := 0; i < 8; i++ {
			seen[s.next(r, -1, now, &excl)] = true
		}
		if len(seen) != 8 {
			t.Fatalf("round %d visited %d paths", round, len(seen))
		}
	}
	// path 3 gets mostly NACKs, others mostly ACKs
	for p := uint16(0); p < 8; p++ {
		for i := 0; i < 40; i++ {
			s.ack(p)
		}
		if p == 3 {
			for i := 0; i < 40; i++ {
				s.nack(p)
			}
		}
	}
	// path 5 loses packets
	for i := 0; i < 5; i++ {
		s.loss(5)
	}
	s.pos = s.plen // force a re-permutation
	for round := 0; round < 20; round++ {
		for i := 0; i < 6; i++ {
			if p := s.next(r, -1, now, &excl); p == 3 || p == 5 {
				t.Fatalf("round %d used excluded path %d", round, p)
			}
		}
		if s.plen != 6 {
			t.Fatalf("round %d: %d active paths", round, s.plen)
		}
	}
	if excl != 2 || !s.Excluded(3) || !s.Excluded(5) {
		t.Fatalf("excluded %d", excl)
	}
	// paths rejoin after excludeFor with a clean record
	now += 100
	for round := 0; round < 3; round++ {
		for i := 0; i < 8; i++ {
			s.next(r, -1, now, &excl)
		}
	}
	if s.Excluded(3) || s.Excluded(5) || s.plen != 8 {
		t.Fatalf("paths did not rejoin: plen %d", s.plen)
	}
	// never more than half of the paths excluded
	for p := uint16(0); p < 8; p++ {
		for i := 0; i < 10; i++ {
			s.loss(p)
		}
	}
	for i := 0; i < 8; i++ {
		s.nack(1)
	}
	s.pos = s.plen
	s.next(r, -1, now, &excl)
	if s.plen < 4 {
		t.Fatalf("%d active paths, at most half may be excluded", s.plen)
	}
	// a retransmission avoids its previous path
	for i := 0; i < 100; i++ {
		if p := s.next(r, 2, now, &excl); p == 2 && s.plen > 1 {
			t.Fatal("next returned the path to avoid")
		}
	}
}

// A path that silently drops DATA is excluded and the transfer completes.
func TestBadPathExcluded(t *testing.T) {
	n := newTestNet(t, 11, Config{}, Config{})
	n.middle = func(from, to int, b []byte) ([]byte, bool) {
		var f Frame
		if ParseFrame(b, &f) == nil && f.Header.Type == TypeData && from == 0 && f.Header.PathID == 2 {
			return b, false
		}
		return b, true
	}
	runExchange(t, n, 3<<20, 100)
	st := n.hosts[0].ep.Stats()
	t.Logf("sender: rto %d excluded %d", st.RTOFires, st.PathsExcluded)
	if st.PathsExcluded == 0 {
		t.Fatal("lossy path never excluded")
	}
	// without exclusion 1/8 of ~2200 packets (~275) would be lost; with it far fewer
	if st.RTOFires > 60 {
		t.Fatalf("%d RTO losses: exclusion ineffective", st.RTOFires)
	}
}

func TestConnTableFullRefuses(t *testing.T) {
	b := mkEP(t, ipB, func(c *Config) { c.MaxConns = 2 })
	b.Listen(80)
	var errs []error
	for i := 0; i < 3; i++ {
		a := mkEP(t, [4]byte{10, 0, 1, byte(i + 1)}, nil)
		h, _ := a.Dial(addrOf(b, 80), DialOptions{}, 0)
		a.Write(h, []byte("x"), 0)
		deliver(t, b, us, poll(t, a, 0, true)...)
		deliver(t, a, 2*us, poll(t, b, us, true)...)
		ev, _ := findEvent(events(a), EventClosed)
		errs = append(errs, ev.Err)
	}
	if errs[0] != nil || errs[1] != nil || errs[2] != ErrConnRefused {
		t.Fatalf("errors %v", errs)
	}
	if st := b.Stats(); st.ConnsActive != 2 || st.Refused != 1 {
		t.Fatalf("stats %+v", st)
	}
}

package ndp

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

func coalescing(c *Config) { c.CoalesceControl = true }

// A batch of arrivals from one sender is answered by one frame: an ACK of
// the first packet whose bitmap acknowledges the rest and which carries
// the pulls released meanwhile; the sender takes all of it.
func TestCoalescedAckAndPull(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, coalescing)
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
	const batch = 20
	deliver(t, b, 10*us, data[:batch]...)
	pulls := 0
	for _, ev := range events(b) {
		if ev.Kind == EventPulls {
			for i := 0; i < ev.Count; i++ {
				b.PullReleased(ev.Handle, 10*us)
				pulls++
			}
		}
	}
	if pulls != batch {
		t.Fatalf("%d pulls for %d arrivals", pulls, batch)
	}
	out := poll(t, b, 10*us, true)
	if len(out) != 1 {
		t.Fatalf("%d control frames for a batch of %d arrivals, want 1", len(out), batch)
	}
	hd := out[0].f.Header
	if hd.Type != TypeAck || hd.Flags&(FlagAckMore|FlagPull) != FlagAckMore|FlagPull {
		t.Fatalf("merged frame %+v", hd)
	}
	if hd.Seq != data[0].f.Header.Seq || hd.Offset != 1<<(batch-1)-1 || hd.PullCounter != batch {
		t.Fatalf("merged frame acks %d + bitmap %#x, pull counter %d; want %d + %#x, %d",
			hd.Seq, hd.Offset, hd.PullCounter, data[0].f.Header.Seq, uint64(1<<(batch-1)-1), batch)
	}
	if st := b.Stats(); st.AcksOut != 1 || st.PullsOut != 1 || st.ControlMerged != 2*batch-1 {
		t.Fatalf("receiver stats: %d ACK frames, %d PULLs out, %d merged", st.AcksOut, st.PullsOut, st.ControlMerged)
	}
	deliver(t, a, 20*us, out...)
	// The sender saw 20 ACKs and 20 pulls: it sends 20 more packets (30
	// more are waiting) and nothing retransmits.
	next := poll(t, a, 20*us, true)
	if got := len(ofType(next, TypeData)); got != batch {
		t.Fatalf("sender answered the merged pull with %d packets, want %d", got, batch)
	}
	if st := a.Stats(); st.AcksIn != 1 || st.PullsIn != 1 || st.Retransmits != 0 {
		t.Fatalf("sender stats: AcksIn %d PullsIn %d Retransmits %d", st.AcksIn, st.PullsIn, st.Retransmits)
	}
	if _, ok := a.RTT(h); !ok {
		t.Fatalf("no RTT sample from a merged ACK")
	}
}

// Merging never reaches across connections, past a popped frame, or
// beyond the 64-packet bitmap.
func TestCoalescingBounds(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, coalescing)
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	mss := a.MSS()
	var frames []rec
	for i := 0; i < 2; i++ {
		h, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		a.Write(h, pattern(i, 3*mss), 0)
		frames = append(frames, poll(t, a, 0, true)...)
	}
	// interleave the two connections' packets
	deliver(t, b, 1*us, frames[0], frames[3], frames[1], frames[4])
	events(b)
	out := poll(t, b, 1*us, true)
	if len(out) != 2 {
		t.Fatalf("two connections' ACKs in %d frames, want 2 (one each)", len(out))
	}
	for _, r := range out {
		if r.f.Header.Offset != 1 {
			t.Fatalf("ACK %+v: want bitmap 1 (the next packet)", r.f.Header)
		}
	}
	// the third packets arrive after the frames left: new frames
	deliver(t, b, 2*us, frames[2], frames[5])
	events(b)
	if out := poll(t, b, 2*us, true); len(out) != 2 || out[0].f.Header.Flags&FlagAckMore != 0 {
		t.Fatalf("late arrivals: %d frames %+v", len(out), out)
	}

	// the bitmap reaches 64 packets past the frame's own, not 65
	c, d := mkEP(t, ipA, func(c *Config) { c.IW = 70 }), mkEP(t, ipB, coalescing)
	d.Listen(80)
	h, _ := c.Dial(addrOf(d, 80), DialOptions{}, 0)
	c.Write(h, pattern(9, 70*mss), 0)
	rs := poll(t, c, 0, true)
	deliver(t, d, 1*us, rs[0], rs[65], rs[66])
	events(d)
	out = poll(t, d, 1*us, true)
	if len(out) != 2 || out[0].f.Header.Flags&FlagAckMore != 0 || out[1].f.Header.Offset != 1 {
		t.Fatalf("ACKs 0, 65, 66: %d frames %+v", len(out), out)
	}
}

// With coalescing at both ends, lossy, reordered transfers of eight
// connections at once finish byte-exact, in fewer frames than without.
func TestCoalescedTransfersComplete(t *testing.T) {
	run := func(co bool) (frames uint64) {
		mod := func(c *Config) { c.CoalesceControl = co; c.RecvBuffer = 64 << 10 } // flow control engages too
		a, b := mkEP(t, ipA, mod), mkEP(t, ipB, mod)
		if err := b.Listen(80); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		buf := make([]byte, MaxFrameLen(a.cfg.MTU))
		var inflight [2][][]byte // frames toward a, toward b
		var now Time
		type xfer struct {
			h    Handle
			data []byte
		}
		var sent []xfer
		got := map[Handle][]byte{}
		finished := map[Handle]bool{}
		done := 0
		readConn := func(h Handle) {
			var sink [8192]byte
			for {
				n, err := b.Read(h, sink[:])
				got[h] = append(got[h], sink[:n]...)
				if err != nil {
					done++
					finished[h] = true
					b.Release(h)
					return
				}
				if n == 0 {
					return
				}
			}
		}
		for i := 0; i < 8; i++ {
			h, err := a.Dial(addrOf(b, 80), DialOptions{}, now)
			if err != nil {
				t.Fatal(err)
			}
			d := pattern(i, 20000+rng.IntN(200000))
			sent = append(sent, xfer{h, d})
		}
		written := make([]int, len(sent))
		for step := 0; step < 200000 && done < len(sent); step++ {
			now += Time(rng.IntN(int(20 * us)))
			for i, x := range sent {
				if written[i] < len(x.data) {
					k, _ := a.Write(x.h, x.data[written[i]:], now)
					written[i] += k
					if written[i] == len(x.data) {
						a.CloseWrite(x.h, now)
					}
				}
			}
			for _, ep := range []*Endpoint{a, b} {
				for {
					ev, ok := ep.PollEvent()
					if !ok {
						break
					}
					switch ev.Kind {
					case EventPulls:
						for k := 0; k < ev.Count; k++ {
							ep.PullReleased(ev.Handle, now)
						}
					case EventAccepted, EventReadable:
						if ep != b || finished[ev.Handle] {
							break
						}
						readConn(ev.Handle)
					}
				}
				if t, ok := ep.NextTimer(); ok && t <= now {
					ep.HandleTimers(now)
				}
			}
			// one batch each way, then delivery with 2% loss and some reordering
			for dir, ep := range []*Endpoint{a, b} {
				for {
					n, _ := ep.PollFrame(buf, now, true)
					if n == 0 {
						break
					}
					frames++
					if rng.IntN(50) != 0 {
						inflight[1-dir] = append(inflight[1-dir], append([]byte(nil), buf[:n]...))
					}
				}
			}
			for dir, ep := range []*Endpoint{a, b} {
				q := inflight[dir]
				rng.Shuffle(len(q), func(i, j int) {
					if rng.IntN(8) == 0 {
						q[i], q[j] = q[j], q[i]
					}
				})
				for _, f := range q {
					ep.HandleFrame(f, now)
				}
				inflight[dir] = q[:0]
			}
		}
		if done != len(sent) {
			t.Fatalf("coalesce=%v: %d of %d transfers finished\na %+v\nb %+v", co, done, len(sent), a.Stats(), b.Stats())
		}
		var all [][]byte
		for _, d := range got {
			all = append(all, d)
		}
		for _, x := range sent {
			found := false
			for _, d := range all {
				found = found || bytes.Equal(d, x.data)
			}
			if !found {
				t.Fatalf("coalesce=%v: a %d-byte transfer arrived corrupted", co, len(x.data))
			}
		}
		return frames
	}
	plain, merged := run(false), run(true)
	t.Logf("frames exchanged: %d one per ACK and PULL, %d coalesced", plain, merged)
	if merged >= plain {
		t.Fatalf("coalescing sent %d frames, not fewer than %d", merged, plain)
	}
}

// An RPC server's answer carries the ACK of the request (FlagAck): one
// frame instead of an ACK and the DATA, and the client's request is
// acknowledged by it (no retransmission after the RTO).
func TestAnswerCarriesAck(t *testing.T) {
	for _, co := range []bool{false, true} {
		mod := func(c *Config) { c.CoalesceControl = co }
		a, b := mkEP(t, ipA, mod), mkEP(t, ipB, mod)
		if err := b.Listen(80); err != nil {
			t.Fatal(err)
		}
		h, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		a.Write(h, []byte("request"), 0)
		a.CloseWrite(h, 0)
		req := poll(t, a, 0, true)
		deliver(t, b, 5*us, req...)
		ev, ok := findEvent(events(b), EventAccepted)
		if !ok {
			t.Fatal("not accepted")
		}
		buf := make([]byte, 64)
		if n, _ := b.Read(ev.Handle, buf); string(buf[:n]) != "request" {
			t.Fatalf("server read %q", buf[:n])
		}
		b.Write(ev.Handle, []byte("answer"), 6*us)
		b.CloseWrite(ev.Handle, 6*us)
		out := poll(t, b, 6*us, true)
		want := 2
		if co {
			want = 1
		}
		if len(out) != want {
			t.Fatalf("coalesce=%v: the answer took %d frames, want %d", co, len(out), want)
		}
		data := ofType(out, TypeData)
		if len(data) != 1 {
			t.Fatalf("coalesce=%v: %d DATA frames", co, len(data))
		}
		if carried := data[0].f.Header.Flags&FlagAck != 0; carried != co {
			t.Fatalf("coalesce=%v: DATA carries an ACK: %v", co, carried)
		}
		if co && data[0].f.Header.PullCounter != req[0].f.Header.Seq {
			t.Fatalf("carried ACK of %d, want the request's %d", data[0].f.Header.PullCounter, req[0].f.Header.Seq)
		}
		deliver(t, a, 10*us, out...)
		if n, _ := a.Read(h, buf); string(buf[:n]) != "answer" {
			t.Fatalf("client read %q", buf[:n])
		}
		// Past any RTO: the request was acknowledged, nothing is resent.
		a.HandleTimers(50 * ms)
		if rs := ofType(poll(t, a, 50*ms, true), TypeData); len(rs) != 0 || a.Stats().Retransmits != 0 {
			t.Fatalf("coalesce=%v: the client resent its request (%d frames, %d retransmits): the carried ACK was lost", co, len(rs), a.Stats().Retransmits)
		}
	}
}

// A carried ACK whose DATA a switch returned to sender is sent again on
// its own.
func TestBouncedCarriedAckRequeued(t *testing.T) {
	a, b := mkEP(t, ipA, coalescing), mkEP(t, ipB, coalescing)
	b.Listen(80)
	h, _ := a.Dial(addrOf(b, 80), DialOptions{}, 0)
	a.Write(h, []byte("request"), 0)
	a.CloseWrite(h, 0)
	req := poll(t, a, 0, true)
	deliver(t, b, 5*us, req...)
	ev, _ := findEvent(events(b), EventAccepted)
	b.Write(ev.Handle, []byte("answer"), 6*us)
	out := poll(t, b, 6*us, true)
	if len(out) != 1 || out[0].f.Header.Flags&FlagAck == 0 {
		t.Fatalf("answer: %+v", out)
	}
	bounced := append([]byte(nil), out[0].b...)
	n, err := TrimFrame(bounced)
	if err != nil {
		t.Fatal(err)
	}
	bounced = bounced[:n]
	if err := BounceFrame(bounced); err != nil {
		t.Fatal(err)
	}
	if err := b.HandleFrame(bounced, 7*us); err != nil {
		t.Fatal(err)
	}
	var acks []rec
	for _, r := range poll(t, b, 7*us, true) {
		if r.f.Header.Type == TypeAck || r.f.Header.Flags&FlagAck != 0 {
			acks = append(acks, r)
		}
	}
	if len(acks) != 1 {
		t.Fatalf("after the bounce: %d frames acknowledge the request, want 1", len(acks))
	}
	got := acks[0].f.Header
	seq := got.Seq
	if got.Type == TypeData {
		seq = got.PullCounter
	}
	if seq != req[0].f.Header.Seq {
		t.Fatalf("re-sent ACK of %d, want %d", seq, req[0].f.Header.Seq)
	}
}

// A carried ACK echoes the path its packet arrived on (Header.AckPath), as
// an ACK frame does, so the sender tells the copies of a packet apart and
// learns from a late peer: here the client's RTO fires on its request
// (the server was late), and the answer that carries the ACK of the first
// copy arrives 3 ms after it left. The fire counts as spurious and the
// connection's RTO stays at least twice that late sample, as it does when
// the ACK comes in a frame of its own. Without the echo (a peer that does
// not set it) the ACK names no copy: no sample, nothing learnt.
func TestCarriedAckEchoesPath(t *testing.T) {
	for _, echo := range []bool{true, false} {
		mod := func(c *Config) { c.CoalesceControl = true }
		a, b := mkEP(t, ipA, mod), mkEP(t, ipB, mod)
		if err := b.Listen(80); err != nil {
			t.Fatal(err)
		}
		h, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		a.Write(h, []byte("request"), 0)
		req := poll(t, a, 0, true)
		deliver(t, b, 5*us, req...)
		ev, ok := findEvent(events(b), EventAccepted)
		if !ok {
			t.Fatal("not accepted")
		}
		buf := make([]byte, 64)
		b.Read(ev.Handle, buf)
		b.Write(ev.Handle, []byte("answer"), 3*ms-10*us)
		out := ofType(poll(t, b, 3*ms-10*us, true), TypeData)
		if len(out) != 1 || out[0].f.Header.Flags&FlagAck == 0 {
			t.Fatalf("the answer does not carry the request's ACK (%d DATA frames)", len(out))
		}
		if got, want := out[0].f.Header.AckPath, uint8(req[0].f.Header.PathID+1); got != want {
			t.Fatalf("carried ACK echoes path %d, want %d (the request's path + 1)", got, want)
		}
		// The client's RTO fired meanwhile: it resent the request.
		a.HandleTimers(2 * ms)
		if a.Stats().RTOFires != 1 {
			t.Fatalf("RTO fires %d, want 1", a.Stats().RTOFires)
		}
		poll(t, a, 2*ms, true)
		if !echo {
			// an older peer: byte 27 left zero
			fr := out[0].f
			fr.Header.AckPath = 0
			nb := make([]byte, MaxFrameLen(a.cfg.MTU))
			n, err := BuildFrame(nb, &fr)
			if err != nil {
				t.Fatal(err)
			}
			out[0].b = nb[:n]
		}
		deliver(t, a, 3*ms, out...)
		st := a.Stats()
		info, _ := a.RTT(h)
		if echo && (st.SpuriousRTOs != 1 || info.BaseRTO < 6*time.Millisecond) {
			t.Fatalf("spurious RTOs %d, base RTO %v: the late first copy's ACK was not recognised (want 1, >= 6ms)", st.SpuriousRTOs, info.BaseRTO)
		}
		if !echo && (st.SpuriousRTOs != 0 || info.BaseRTO >= 6*time.Millisecond) {
			t.Fatalf("without the echo: spurious RTOs %d, base RTO %v, want no sample taken", st.SpuriousRTOs, info.BaseRTO)
		}
	}
}

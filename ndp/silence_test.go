package ndp

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// outageNet is a two-host net whose link can be taken down: every frame sent
// while it is down is lost. Host 0 dials host 1 and sends size bytes.
type outageNet struct {
	*testNet
	down bool
	h    Handle
	data []byte
}

func newOutageNet(t *testing.T, size int, cfg0, cfg1 Config) *outageNet {
	o := &outageNet{testNet: newTestNet(t, 3, cfg0, cfg1)}
	o.middle = func(_, _ int, b []byte) ([]byte, bool) { return b, !o.down }
	if err := o.hosts[1].ep.Listen(80); err != nil {
		t.Fatal(err)
	}
	h, err := o.hosts[0].ep.Dial(o.addr(1, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	o.h, o.data = h, pattern(7, size)
	return o
}

// received is what the server read so far.
func (o *outageNet) received() int {
	if len(o.hosts[1].accepted) == 0 {
		return 0
	}
	return len(o.hosts[1].got(o.hosts[1].accepted[0]))
}

// runUntil steps until cond or the virtual time limit.
func (o *outageNet) runUntil(limit Time, cond func() bool) bool {
	for o.now < limit {
		if cond() {
			return true
		}
		if !o.step() {
			return cond()
		}
	}
	return cond()
}

// A link outage during a transfer: the connection rides it out, the transfer
// resumes within about one keepalive interval of the link's return, completes
// with the right bytes, and the outage costs each end a handful of
// keepalives, backed off.
func TestOutageRideThrough(t *testing.T) {
	for _, outage := range []time.Duration{time.Second, 3 * time.Second} {
		t.Run(outage.String(), func(t *testing.T) {
			o := newOutageNet(t, 2<<20, Config{}, Config{})
			o.appAt = 0
			// write as the buffer allows, with the link going down once a
			// quarter arrived
			off := 0
			var downAt, upAt, resumedAt Time
			atUp := 0
			ep := o.hosts[0].ep
			for i := 0; ; i++ {
				if off < len(o.data) {
					k, err := ep.Write(o.h, o.data[off:], o.now)
					if err != nil {
						t.Fatalf("write: %v", err)
					}
					if off += k; off == len(o.data) {
						ep.CloseWrite(o.h, o.now)
					}
				}
				got := o.received()
				switch {
				case downAt == 0 && got >= len(o.data)/4:
					downAt, o.down = o.now, true
					o.appAt = o.now + Time(outage)
				case o.down && o.now >= downAt+Time(outage):
					upAt, o.down, atUp = o.now, false, got
					o.appAt = 0
				case upAt != 0 && resumedAt == 0 && got > atUp:
					resumedAt = o.now
				}
				if len(o.hosts[1].accepted) > 0 && o.hosts[1].eof[o.hosts[1].accepted[0]] {
					break
				}
				if !o.step() || o.now > Time(outage)+Time(30*time.Second) {
					t.Fatalf("stuck: got %d of %d, %v", got, len(o.data), o)
				}
			}
			if !bytes.Equal(o.hosts[1].got(o.hosts[1].accepted[0]), o.data) {
				t.Fatal("bytes differ")
			}
			if len(o.hosts[0].closed)+len(o.hosts[1].closed) != 0 {
				t.Fatalf("closed during the transfer: %v %v", o.hosts[0].closed, o.hosts[1].closed)
			}
			resume := time.Duration(resumedAt - upAt)
			t.Logf("outage %v: resumed %v after the link came back, done at %v", outage, resume, time.Duration(o.now))
			if resume > time.Duration(o.hosts[0].ep.cfg.MaxProbeInterval)+50*time.Millisecond {
				t.Errorf("resumed %v after the link came back, want within a keepalive interval", resume)
			}
			// keepalives: from 128ms of silence, doubling to 250ms: about
			// outage/250ms+2 per waiting end
			want := uint64(outage/(250*time.Millisecond)) + 3
			for i, h := range o.hosts {
				st := h.ep.Stats()
				if st.SilenceProbes > want || st.SilenceResumes > 2 {
					t.Errorf("host %d: %d keepalives (want at most %d), %d resumes", i, st.SilenceProbes, want, st.SilenceResumes)
				}
				t.Logf("host %d: keepalives %d, resumes %d, RTO fires %d", i, st.SilenceProbes, st.SilenceResumes, st.RTOFires)
			}
		})
	}
}

// An outage longer than the user timeout: both ends fail with ErrTimeout at
// the user timeout after the last frame each heard, though neither hears the
// other's RESET; reads and writes then return the error.
func TestOutagePastUserTimeout(t *testing.T) {
	ut := time.Second
	cfg := Config{UserTimeout: ut}
	o := newOutageNet(t, 4<<20, cfg, cfg)
	ep0 := o.hosts[0].ep
	off := 0
	var downAt Time
	lastHeard := [2]Time{}
	o.testNet.middle = func(from, to int, b []byte) ([]byte, bool) {
		if !o.down {
			lastHeard[to] = o.now + o.latency
		}
		return b, !o.down
	}
	o.runUntil(Time(10*time.Second), func() bool {
		if off < len(o.data) && !o.down {
			k, _ := ep0.Write(o.h, o.data[off:], o.now)
			off += k
		}
		if !o.down && o.received() >= len(o.data)/4 {
			downAt, o.down = o.now, true
		}
		return len(o.hosts[0].closed) == 1 && len(o.hosts[1].closed) == 1
	})
	if downAt == 0 {
		t.Fatal("the link never went down")
	}
	for i, h := range o.hosts {
		if len(h.closed) != 1 {
			t.Fatalf("host %d did not give up: %v", i, o)
		}
		var at Time
		for _, ev := range h.events {
			if ev.Kind == EventClosed {
				if !errors.Is(ev.Err, ErrTimeout) {
					t.Fatalf("host %d closed with %v", i, ev.Err)
				}
			}
		}
		at = Time(0)
		for hd := range h.closed {
			_, err := h.ep.Read(hd, make([]byte, 10))
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("host %d read: %v", i, err)
			}
		}
		_ = at
		if st := h.ep.Stats(); st.UserTimeouts != 1 || st.SilenceProbes > 8 {
			t.Fatalf("host %d: %d user timeouts, %d keepalives", i, st.UserTimeouts, st.SilenceProbes)
		}
	}
	// both gave up at the same step, the user timeout after the last frame each
	// heard; the run stopped at the later of the two
	if last := max(lastHeard[0], lastHeard[1]); o.now != last+Time(ut) {
		t.Fatalf("gave up at %v, want %v (last frames heard %v, link down %v)", time.Duration(o.now), time.Duration(last+Time(ut)), lastHeard, time.Duration(downAt))
	}
	if _, err := ep0.Write(o.h, []byte("x"), o.now); !errors.Is(err, ErrTimeout) {
		t.Fatalf("write after the timeout: %v", err)
	}
}

// One end gives up during an outage (a short user timeout) and its RESET is
// lost; when the link returns, the other end's next keepalive is answered with
// a RESET (the connection is gone there), so it fails with ErrConnReset well
// before its own user timeout.
func TestGaveUpPeerFoundByKeepalive(t *testing.T) {
	o := newOutageNet(t, 4<<20, Config{}, Config{UserTimeout: time.Second})
	ep0 := o.hosts[0].ep
	off := 0
	var upAt Time
	o.runUntil(Time(20*time.Second), func() bool {
		if off < len(o.data) {
			k, _ := ep0.Write(o.h, o.data[off:], o.now)
			off += k
		}
		switch {
		case !o.down && upAt == 0 && o.received() >= len(o.data)/4:
			o.down = true
			o.appAt = o.now + Time(2*time.Second)
		case o.down && o.now >= o.appAt:
			o.down, upAt, o.appAt = false, o.now, 0
		}
		return len(o.hosts[0].closed) == 1
	})
	if len(o.hosts[1].closed) != 1 || len(o.hosts[0].closed) != 1 {
		t.Fatalf("closed: %v %v", o.hosts[0].closed, o.hosts[1].closed)
	}
	for _, err := range o.hosts[1].closed {
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("server: %v", err)
		}
	}
	for _, err := range o.hosts[0].closed {
		if !errors.Is(err, ErrConnReset) {
			t.Fatalf("client: %v", err)
		}
	}
	if d := time.Duration(o.now - upAt); d > 300*time.Millisecond {
		t.Fatalf("client learned %v after the link came back", d)
	}
}

// An idle connection (nothing outstanding, the peer's stream not ended) is not
// failed for being idle: it sends a keepalive every third of the user timeout,
// the peer answers, and it lives on.
func TestIdleConnectionLives(t *testing.T) {
	ut := time.Second
	o := newOutageNet(t, 100<<10, Config{UserTimeout: ut}, Config{UserTimeout: ut})
	ep0 := o.hosts[0].ep
	o.writeAll(0, o.h, o.data, false)
	if !o.runUntil(Time(time.Second), func() bool { return o.received() == len(o.data) }) {
		t.Fatal("transfer did not finish")
	}
	idleFrom := o.now
	o.runUntil(o.now+Time(10*time.Second), func() bool { return false })
	for i, h := range o.hosts {
		if len(h.closed) != 0 {
			t.Fatalf("host %d closed an idle connection: %v", i, h.closed)
		}
		// one keepalive per third of the user timeout (the answer restarts
		// the silence): about 30 in 10s
		if st := h.ep.Stats(); st.SilenceProbes > 31 || st.UserTimeouts != 0 {
			t.Fatalf("host %d: %d keepalives, %d user timeouts in %v idle", i, st.SilenceProbes, st.UserTimeouts, time.Duration(o.now-idleFrom))
		}
	}
	// it still works, and with both streams ended it closes cleanly
	o.writeAll(0, o.h, o.data, true)
	if !o.runUntil(o.now+Time(time.Second), func() bool { return o.received() == 2*len(o.data) }) {
		t.Fatalf("second transfer: got %d, %v", o.received(), o)
	}
	if st := ep0.Stats(); st.UserTimeouts != 0 {
		t.Fatalf("idle connection: %d user timeouts", st.UserTimeouts)
	}
}

// With nothing outstanding and the peer's stream ended, a connection expects
// nothing: no timer, no keepalive.
func TestNothingExpectedNoTimer(t *testing.T) {
	o := newOutageNet(t, 1000, Config{UserTimeout: time.Second}, Config{UserTimeout: time.Second})
	o.writeAll(0, o.h, o.data, false)
	o.runUntil(Time(time.Second), func() bool { return len(o.hosts[1].accepted) > 0 && o.received() == len(o.data) })
	srv := o.hosts[1]
	if err := srv.ep.CloseWrite(srv.accepted[0], o.now); err != nil {
		t.Fatal(err)
	}
	o.runUntil(o.now+Time(time.Second), func() bool { return o.hosts[0].eof[o.h] })
	o.run(100000, nil)
	if at, ok := o.hosts[0].ep.NextTimer(); ok {
		t.Fatalf("timer at %v on a connection that expects nothing", time.Duration(at))
	}
	o.now += Time(time.Hour)
	o.hosts[0].ep.HandleTimers(o.now)
	if len(o.hosts[0].closed) != 0 {
		t.Fatalf("closed: %v", o.hosts[0].closed)
	}
}

// A keepalive from a peer whose receiver has not synced yet (a dialer whose
// request's ACKs were all lost: it probes before it has heard a byte of the
// response) proves the peer alive, not that it has state for our stream: the
// response's first packets must still carry SYN, or the dialer drops them as
// out of window forever while each side keeps answering the other's
// keepalives (a livelock no user timeout ends).
func TestKeepaliveBeforeResponseKeepsSYN(t *testing.T) {
	o := newOutageNet(t, 100, Config{}, Config{})
	down1 := true // frames from the server are lost
	o.middle = func(from, _ int, b []byte) ([]byte, bool) { return b, !(down1 && from == 1) }
	o.writeAll(0, o.h, o.data, true)
	// the server reads the request; the dialer hears nothing and probes
	// (its keepalive, not established, is a resend of a first-RTT packet:
	// a duplicate at the server)
	if !o.runUntil(Time(5*time.Second), func() bool {
		return o.received() == len(o.data) && o.hosts[1].ep.Stats().DuplicatesIn > 0 && o.hosts[0].ep.Stats().SilenceProbes > 0
	}) {
		t.Fatalf("request not read or no keepalive: %v", o)
	}
	srv := o.hosts[1].accepted[0]
	o.writeAll(1, srv, pattern(9, 100), true)
	down1 = false
	got := func() []byte { return o.hosts[0].got(o.h) }
	if !o.runUntil(o.now+Time(5*time.Second), func() bool { return len(got()) == 100 }) {
		t.Fatalf("response not delivered: got %d bytes, client %+v", len(got()), o.hosts[0].ep.Stats())
	}
	if !bytes.Equal(got(), pattern(9, 100)) {
		t.Fatal("response corrupted")
	}
}

// A dialer whose every first-RTT packet is lost for longer than probeAfter
// (the server's receive ring overflowing under CPU load) has never reached a
// peer that holds the connection: its keepalive resends its oldest
// first-RTT packet, which opens the connection once a copy gets through,
// instead of a PULL, which the server could only answer with a RESET. The
// call completes once the path returns, with no RESET either way.
func TestKeepaliveBeforeAcceptOpens(t *testing.T) {
	o := newOutageNet(t, 3000, Config{}, Config{})
	down0 := true // frames from the dialer are lost
	o.middle = func(from, _ int, b []byte) ([]byte, bool) { return b, !(down0 && from == 0) }
	o.writeAll(0, o.h, o.data, true)
	if !o.runUntil(Time(3*time.Second), func() bool { return o.hosts[0].ep.Stats().SilenceProbes >= 2 }) {
		t.Fatalf("no keepalive: %v", o)
	}
	down0 = false
	if !o.runUntil(o.now+Time(5*time.Second), func() bool {
		return o.received() == len(o.data) && len(o.hosts[1].accepted) > 0 && o.hosts[1].eof[o.hosts[1].accepted[0]]
	}) {
		t.Fatalf("request not delivered: got %d of %d; dialer closed %v; server %+v", o.received(), len(o.data), o.hosts[0].closed, o.hosts[1].ep.Stats())
	}
	srv := o.hosts[1].accepted[0]
	if !bytes.Equal(o.hosts[1].got(srv), o.data) {
		t.Fatal("request corrupted")
	}
	o.writeAll(1, srv, pattern(9, 2000), true)
	got := func() []byte { return o.hosts[0].got(o.h) }
	if !o.runUntil(o.now+Time(5*time.Second), func() bool { return len(got()) == 2000 }) {
		t.Fatalf("response not delivered: got %d bytes, dialer closed %v", len(got()), o.hosts[0].closed)
	}
	if !bytes.Equal(got(), pattern(9, 2000)) {
		t.Fatal("response corrupted")
	}
	for i, h := range o.hosts {
		if st := h.ep.Stats(); st.ResetsIn+st.ResetsOut+st.UnknownConn != 0 {
			t.Errorf("host %d: %d RESETs in, %d out, %d frames for unknown connections", i, st.ResetsIn, st.ResetsOut, st.UnknownConn)
		}
		for hd, err := range h.closed {
			if err != nil {
				t.Errorf("host %d: connection %v closed with %v", i, hd, err)
			}
		}
	}
}

package daemon

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ring"
)

// TestAppWokenOnlyForWhatItWaits: with the application's sleep word saying
// one of its goroutines sleeps, the core writes the app's eventfd for data
// that arrives for it, but not for what nobody waits on: the dial's OK
// reply, TX frames coming back while no writer is out of frames, the slot's
// OpSlotFree. Returned frames do wake it while a writer waits for frames.
// (The sleep word is set by hand and no goroutine of the app polls until the
// checks are made, so every count is exact.)
func TestAppWokenOnlyForWhatItWaits(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	srvApp, cli := h.attach(), h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	wakeups := func() uint64 {
		snap, err := QueryStatus(h.path)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range snap.Apps {
			if a.App == uint32(cli.App()) {
				return a.Counters.AppWakeups
			}
		}
		t.Fatal("client app not in status")
		return 0
	}
	// What the app has waiting for it on its rings (the core has produced it).
	waitingFor := func(what string, cond func() bool) {
		t.Helper()
		waitFor(t, what, 10*time.Second, func() (bool, string) { return cond(), "" })
	}
	atomic.AddUint32(cli.sleepWord, 1) // "a goroutine sleeps"
	defer atomic.AddUint32(cli.sleepWord, ^uint32(0))

	// Dial, write, close the write side: the core reads them, replies OK to
	// the dial and returns the frame; neither wakes the sleeper.
	s, err := cli.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := payload(100, 1)
	if _, err := s.Write(msg, time.Now().Add(10*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	waitingFor("dial reply and completion", func() bool {
		return cli.end.Events.Pending() && cli.end.Completions.Pending()
	})
	if n := wakeups(); n != 0 {
		t.Fatalf("%d wakeups for a dial reply and a completion, want 0", n)
	}

	// The server answers: the data (and its end) wake the sleeper.
	srv, err := l.Accept(time.Now().Add(10*time.Second), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(srv, time.Now().Add(10*time.Second))
	if err != nil || string(got) != string(msg) {
		t.Fatalf("server read %d bytes, %v", len(got), err)
	}
	if _, err := srv.Write(msg, time.Now().Add(10*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	waitingFor("response on RX", func() bool { return cli.end.Sockets[s.slot].RX.Pending() })
	waitFor(t, "a wakeup for the response", 10*time.Second, func() (bool, string) {
		n := wakeups()
		return n >= 1, fmt.Sprint(n)
	})
	if _, err := readAll(s, time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}

	// Closing the slot frees it: OpSlotFree wakes nobody.
	before := wakeups()
	s.Close()
	waitingFor("slot free on RX", func() bool { return cli.end.Sockets[s.slot].RX.Pending() })
	if n := wakeups(); n != before {
		t.Fatalf("%d wakeups for a freed slot, want 0", n-before)
	}

	// A writer out of frames: returned frames wake the sleeper.
	atomic.AddUint32(cli.sleepWord, appFrameWaiter)
	defer atomic.AddUint32(cli.sleepWord, ^(appFrameWaiter - 1))
	s2, err := cli.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Write(msg, time.Now().Add(10*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a wakeup for returned frames", 10*time.Second, func() (bool, string) {
		n := wakeups()
		return n > before, fmt.Sprint(n - before)
	})
}

func TestEventWake(t *testing.T) {
	for _, c := range []struct {
		name string
		d    ring.Desc
		want wakeReason
	}{
		{"dial ok", ring.Desc{Op: ring.OpReply, Cookie: connectCookie | 3, Aux: uint64(StatusOK)}, 0},
		{"dial refused", ring.Desc{Op: ring.OpReply, Cookie: connectCookie | 3, Aux: uint64(StatusNoNeighbor)}, wakeReaders},
		{"listen reply", ring.Desc{Op: ring.OpReply, Cookie: 7, Aux: uint64(StatusOK)}, wakeReaders},
		{"accepted", ring.Desc{Op: EvAccepted}, wakeReaders},
	} {
		if got := eventWake(&c.d); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if m := (wakeReaders | wakeWriters).mask(); m != appSleepersMask|appFrameWaitMask {
		t.Errorf("mask %#x", m)
	}
	if m := wakeWriters.mask(); m&appSleepersMask != 0 {
		t.Errorf("writers' mask %#x wakes a sleeper with no writer waiting", m)
	}
}

// TestAdaptSpin: the core's spin window doubles (up to MaxSpinFor) while
// sleeps end early for input, and halves back to SpinFor once they run to
// their timeout or far past the window.
func TestAdaptSpin(t *testing.T) {
	cfg := Config{SpinFor: 50 * time.Microsecond, MaxSpinFor: time.Millisecond}
	cfg.populate()
	c := &Core{cfg: cfg, spin: cfg.SpinFor}
	steps := []struct {
		slept time.Duration
		input bool
		want  time.Duration
	}{
		{10 * time.Microsecond, true, 100 * time.Microsecond}, // woken within the window
		{80 * time.Microsecond, true, 200 * time.Microsecond},
		{150 * time.Microsecond, true, 400 * time.Microsecond},
		{10 * time.Microsecond, true, 800 * time.Microsecond},
		{10 * time.Microsecond, true, time.Millisecond}, // capped
		{10 * time.Microsecond, true, time.Millisecond},
		{2 * time.Millisecond, true, time.Millisecond},          // past the window, not far: kept
		{10 * time.Millisecond, true, 500 * time.Microsecond},   // far past: idle
		{100 * time.Microsecond, false, 250 * time.Microsecond}, // timed out
		{0, false, 125 * time.Microsecond},
		{0, false, 62500 * time.Nanosecond},
		{0, false, 50 * time.Microsecond}, // floor
		{0, false, 50 * time.Microsecond},
	}
	for i, s := range steps {
		c.adaptSpin(s.slept, s.input)
		if c.spin != s.want {
			t.Fatalf("step %d (slept %v, input %v): window %v, want %v", i, s.slept, s.input, c.spin, s.want)
		}
	}
	// Never spinning stays never spinning; a fixed window stays fixed.
	for _, cfg := range []Config{{SpinFor: -1}, {SpinFor: time.Millisecond, MaxSpinFor: time.Millisecond}} {
		cfg.populate()
		c := &Core{cfg: cfg, spin: max(cfg.SpinFor, 0)}
		c.adaptSpin(time.Microsecond, true)
		if c.spin != max(cfg.SpinFor, 0) {
			t.Errorf("SpinFor %v: window became %v", cfg.SpinFor, c.spin)
		}
	}
}

// TestWriterWokenPerBatchOfFrames: a writer out of TX frames is woken once
// half its socket's in-flight cap has come back, not for every frame the
// transport takes. The transport's buffer holds two frames and the reader
// reads one frame's worth only while the writer waits for frames, so frames
// come back one at a time; the writer's wakeups stay near frames/batch
// (one per returned frame before).
func TestWriterWokenPerBatchOfFrames(t *testing.T) {
	cfg := smallConfig()
	tr := newLoopTransport(2 * int(cfg.Pool.FrameSize))
	h := startHarnessOn(t, cfg, ServerConfig{}, tr)
	srvApp, cli := h.attach(), h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	const frames = 256
	msg := payload(frames*int(cfg.Pool.FrameSize), 3)
	deadline := time.Now().Add(30 * time.Second)
	s, err := cli.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wrote := make(chan error, 1)
	go func() {
		_, err := s.Write(msg, deadline, nil)
		wrote <- err
	}()
	srv, err := l.Accept(deadline, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	got := make([]byte, 0, len(msg))
	buf := make([]byte, cfg.Pool.FrameSize)
	for len(got) < len(msg) {
		if len(got) < len(msg)-int(cfg.Pool.FrameSize)*100 {
			// Read only while the writer waits for frames (so each frame
			// the read lets the core take comes back to a waiting writer).
			waitFor(t, "the writer waiting for frames", 10*time.Second, func() (bool, string) {
				select {
				case err := <-wrote:
					wrote <- err
					return true, ""
				default:
				}
				return atomic.LoadUint32(cli.sleepWord)&appFrameWaitMask != 0, ""
			})
		}
		n, err := srv.Read(buf, deadline, nil)
		if err != nil {
			t.Fatalf("read after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if string(got) != string(msg) {
		t.Fatal("the reader got other bytes than were written")
	}
	snap, err := QueryStatus(h.path)
	if err != nil {
		t.Fatal(err)
	}
	var wakeups uint64
	for _, a := range snap.Apps {
		if a.App == uint32(cli.App()) {
			wakeups = a.Counters.AppWakeups
		}
	}
	batch := socketInflightCap(cfg.Pool.AppFrames) / 2
	if max := uint64(frames/batch + 8); wakeups > max {
		t.Fatalf("the writer was woken %d times for %d frames, want at most %d (one per %d returned)", wakeups, frames, max, batch)
	}
	t.Logf("%d writer wakeups for %d frames (batch %d)", wakeups, frames, batch)
}

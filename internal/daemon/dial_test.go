package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ring"
)

// Pending dials (neighbour resolution off the core loop) over the loop
// transport, where the test decides when and how each resolution ends.

var unresolvedAddr = netip.MustParseAddr("10.0.0.77")

func TestPendingDialConnectsAfterResolution(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	h.tr.setUnresolved(unresolvedAddr, true)
	srvApp, cliApp, other := h.attach(), h.attach(), h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go echoServer(t, l)
	s, err := cliApp.Dial(netip.AddrPortFrom(unresolvedAddr, 7), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := payload(5000, 3) // zero-RTT: written before the dial is resolved
	dl := time.Now().Add(20 * time.Second)
	if _, err := s.Write(msg, dl, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dial pending", 5*time.Second, func() (bool, string) {
		return h.tr.pendingDials() == 1, fmt.Sprint(h.tr.pendingDials())
	})
	// While it waits, the core serves everyone else, the same app included.
	for i := 0; i < 20; i++ {
		for _, app := range []*Client{other, cliApp} {
			m := payload(100+i, byte(i))
			if got := call(t, app, 7, m); !bytes.Equal(got, m) {
				t.Fatalf("call %d during a pending dial: echo differs", i)
			}
		}
	}
	if n := h.tr.resolve(unresolvedAddr, nil); n != 1 {
		t.Fatalf("resolved %d dials, want 1", n)
	}
	got, err := readAll(s, dl)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("after resolution: %v, %d/%d bytes", err, len(got), len(msg))
	}
	s.Close()
	snap := poolSettled(t, h.path, 3)
	if snap.Core.DialsDeferred != 1 || snap.Core.DialsUnresolved != 0 {
		t.Fatalf("core counters %+v", snap.Core)
	}
}

func TestPendingDialFailureReachesApp(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	h.tr.setUnresolved(unresolvedAddr, true)
	app := h.attach()
	remote := netip.AddrPortFrom(unresolvedAddr, 7)
	s, err := app.Dial(remote, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dl := time.Now().Add(20 * time.Second)
	if _, err := s.Write([]byte("lost"), dl, nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dial pending", 5*time.Second, func() (bool, string) {
		return h.tr.pendingDials() == 1, fmt.Sprint(h.tr.pendingDials())
	})
	h.tr.resolve(unresolvedAddr, fmt.Errorf("%w: %v (ARP timed out)", engine.ErrNoNeighbor, unresolvedAddr))
	_, err = s.Read(make([]byte, 16), dl, nil)
	if !errors.Is(err, engine.ErrNoNeighbor) || !strings.Contains(err.Error(), remote.String()) {
		t.Fatalf("read after a failed resolution: %v, want ErrNoNeighbor naming %v", err, remote)
	}
	s.Close()
	waitFor(t, "slot freed", 5*time.Second, func() (bool, string) {
		snap, err := QueryStatus(h.path)
		if err != nil {
			return false, err.Error()
		}
		return snap.Core.DialsUnresolved == 1 && snap.Apps[0].OpenSockets == 0, fmt.Sprintf("core %+v, app %+v", snap.Core, snap.Apps[0])
	})
	poolSettled(t, h.path, 1)
}

// TestPendingDialCancelled: a pending dial the app aborts or closes, or
// whose app dies, is cancelled in the transport and its slot comes back.
func TestPendingDialCancelled(t *testing.T) {
	for _, how := range []string{"abort", "close", "app death"} {
		t.Run(how, func(t *testing.T) {
			h := startHarness(t, smallConfig(), ServerConfig{})
			h.tr.setUnresolved(unresolvedAddr, true)
			keep := h.attach()
			app, err := Attach(h.path, ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer app.Close()
			s, err := app.Dial(netip.AddrPortFrom(unresolvedAddr, 7), DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "dial pending", 5*time.Second, func() (bool, string) {
				return h.tr.pendingDials() == 1, fmt.Sprint(h.tr.pendingDials())
			})
			apps := 2
			switch how {
			case "abort":
				s.Abort()
			case "close":
				s.Close()
			case "app death":
				app.ctl.Close()
				apps = 1
			}
			waitFor(t, "pending dial cancelled", 5*time.Second, func() (bool, string) {
				h.tr.mu.Lock()
				defer h.tr.mu.Unlock()
				return len(h.tr.dialing) == 0 && h.tr.cancelled == 1, fmt.Sprintf("pending %d cancelled %d", len(h.tr.dialing), h.tr.cancelled)
			})
			waitFor(t, "slots freed", 5*time.Second, func() (bool, string) {
				snap, err := QueryStatus(h.path)
				if err != nil {
					return false, err.Error()
				}
				open := 0
				for _, a := range snap.Apps {
					open += a.OpenSockets
				}
				return open == 0, fmt.Sprint(open, " open sockets")
			})
			poolSettled(t, h.path, apps)
			// A late result for the cancelled dial is ignored.
			if n := h.tr.resolve(unresolvedAddr, nil); n != 0 {
				t.Fatalf("resolved %d cancelled dials", n)
			}
			_ = keep
		})
	}
}

// TestCoreSleepsWithEndedOpenSlot: a socket whose stream ended (the app
// read EOF) but which the app keeps open has nothing more to deliver; the
// core must still sleep (its wakeup check once said "readable" forever and
// spun a CPU until the app closed the slot).
func TestCoreSleepsWithEndedOpenSlot(t *testing.T) {
	cfg := smallConfig()
	cfg.SpinFor = -1 // sleep as soon as there is no work
	h := startHarness(t, cfg, ServerConfig{})
	srvApp, cliApp := h.attach(), h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go echoServer(t, l)
	s, err := cliApp.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dl := time.Now().Add(20 * time.Second)
	s.Write([]byte("ping"), dl, nil)
	s.CloseWrite()
	if got, err := readAll(s, dl); err != nil || string(got) != "ping" {
		t.Fatalf("echo: %q, %v", got, err)
	}
	waitFor(t, "transport connection finished", 5*time.Second, func() (bool, string) {
		return h.tr.live() == 1, fmt.Sprint(h.tr.live()) // ours, closed, not yet released
	})
	loops := func() uint64 {
		snap, err := QueryStatus(h.path)
		if err != nil {
			t.Fatal(err)
		}
		return snap.Core.Loops
	}
	before := loops()
	time.Sleep(200 * time.Millisecond)
	// Asleep: a few loops per MaxSleep (10ms) and per status query; a
	// spinning core makes hundreds of thousands.
	if n := loops() - before; n > 500 {
		t.Fatalf("core ran %d loops in 200ms with nothing to do (ended, unclosed slot)", n)
	}
	s.Close()
	poolSettled(t, h.path, 2)
}

// TestStaleConnectReplyDoesNotFailReusedSlot: a deferred dial's failure
// reply travels on the event ring, its slot's OpSlotFree on RX(slot); when
// the event ring is full the reply waits in the daemon's backlog while the
// slot is freed, so the app can see the slot free, and dial on it again,
// before the old reply arrives. That reply must not fail the new dial.
// (The test holds the reply back itself, standing in for the full ring.)
func TestStaleConnectReplyDoesNotFailReusedSlot(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	h.tr.setUnresolved(unresolvedAddr, true)
	app := h.attach()
	remote := netip.AddrPortFrom(unresolvedAddr, 7)
	s1, err := app.Dial(remote, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slot := s1.slot
	if _, err := s1.Write([]byte("x"), time.Now().Add(5*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dial pending", 5*time.Second, func() (bool, string) {
		return h.tr.pendingDials() == 1, fmt.Sprint(h.tr.pendingDials())
	})
	s1.Close()
	h.tr.resolve(unresolvedAddr, fmt.Errorf("%w: %v", engine.ErrNoNeighbor, unresolvedAddr))

	// Poll by hand: hold the failure reply back, let the slot free.
	var stale ring.Desc
	found := false
	app.pollMu.Lock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var evs [16]ring.Desc
		n, err := app.end.Events.Consume(evs[:])
		if err != nil {
			app.pollMu.Unlock()
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if d := evs[i]; !found && d.Op == ring.OpReply && d.Cookie&connectCookie != 0 && int(d.Conn) == slot {
				stale, found = d, true
				continue
			}
			app.event(&evs[i])
		}
		app.rxSlot(slot)
		app.mu.Lock()
		freed := app.socks[slot] == nil
		app.mu.Unlock()
		if found && freed {
			break
		}
		if time.Now().After(deadline) {
			app.pollMu.Unlock()
			t.Fatalf("reply held back %v, slot freed %v", found, freed)
		}
		runtime.Gosched()
	}
	app.pollMu.Unlock()
	if Status(stale.Aux) != StatusNoNeighbor {
		t.Fatalf("held-back reply status %v", Status(stale.Aux))
	}

	s2, err := app.Dial(remote, DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.slot != slot {
		t.Fatalf("new dial on slot %d, want the freed slot %d (test premise)", s2.slot, slot)
	}
	app.pollMu.Lock()
	app.event(&stale) // the old dial's reply, late
	app.pollMu.Unlock()
	s2.mu.Lock()
	ferr := s2.failErr
	s2.mu.Unlock()
	if ferr != nil {
		t.Fatalf("the new dial on slot %d failed with the previous dial's reply: %v", slot, ferr)
	}
}

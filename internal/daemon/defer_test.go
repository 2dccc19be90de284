package daemon

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// deferTransport records how the core polls: for every Poll, whether it
// asked to defer transmits, whether the core had written application data
// (Write, CloseWrite) since the previous Poll, and whether the Poll had
// input. Input arrives as a network's would, a Poll after it was sent: the
// connection events that writes produce become visible (Events) only at
// the Poll after the one that followed them.
type deferTransport struct {
	*loopTransport
	mu      sync.Mutex
	written bool
	seen    int // events pending at the last Poll: visible from the next
	visible int // events Events may hand out
	polls   []deferPoll
}

type deferPoll struct{ deferTx, afterWrite, input bool }

func (t *deferTransport) Write(id ConnID, p []byte, fin bool) (int, error) {
	t.mu.Lock()
	t.written = true
	t.mu.Unlock()
	return t.loopTransport.Write(id, p, fin)
}

func (t *deferTransport) CloseWrite(id ConnID) error {
	t.mu.Lock()
	t.written = true
	t.mu.Unlock()
	return t.loopTransport.CloseWrite(id)
}

func (t *deferTransport) Poll(deferTx, _ bool) bool {
	t.loopTransport.mu.Lock()
	pending := len(t.loopTransport.events)
	t.loopTransport.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	input := t.seen > t.visible
	t.visible, t.seen = t.seen, pending
	t.polls = append(t.polls, deferPoll{deferTx, t.written, input})
	t.written = false
	return input
}

func (t *deferTransport) Events(dst []TransportEvent) int {
	t.mu.Lock()
	k := min(t.visible, len(dst))
	t.mu.Unlock()
	if k == 0 {
		return 0
	}
	n := t.loopTransport.Events(dst[:k])
	t.mu.Lock()
	t.visible -= n
	t.seen -= n
	t.mu.Unlock()
	return n
}

func (t *deferTransport) PollTimeout() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen > 0 {
		return 0 // events still to make visible
	}
	return t.loopTransport.PollTimeout()
}

// TestCoreDefersACKsOnlyWithNothingToSend: the core hands received bytes
// to the application before their ACKs are sent (a deferring Poll) only
// when its applications wrote nothing in that iteration (what they wrote
// leaves in the iteration's own transmit batch), and never defers twice in
// a row after input (a core under steady input sends ACKs within one
// iteration). Echo calls work throughout.
func TestCoreDefersACKsOnlyWithNothingToSend(t *testing.T) {
	tr := &deferTransport{loopTransport: newLoopTransport(64 << 10)}
	h := startHarnessOn(t, smallConfig(), ServerConfig{}, tr)
	srvApp, cliApp := h.attach(), h.attach()
	l, err := srvApp.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	go echoServer(t, l)
	for i, n := range []int{1, 2048, 100 << 10} {
		msg := payload(n, byte(i))
		if got := call(t, cliApp, 7, msg); !bytes.Equal(got, msg) {
			t.Fatalf("size %d: echo differs (got %d bytes)", n, len(got))
		}
	}
	h.stop()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	deferring, prevDeferred := 0, false
	for i, p := range tr.polls {
		if p.deferTx && p.afterWrite {
			t.Fatalf("poll %d deferred transmits although the core had written application data", i)
		}
		if p.deferTx && prevDeferred {
			t.Fatalf("poll %d deferred again right after a deferring poll that had input", i)
		}
		if p.deferTx && p.input {
			deferring++
		}
		prevDeferred = p.deferTx && p.input
	}
	if deferring == 0 {
		t.Fatalf("no deferring poll with input in %d polls", len(tr.polls))
	}
}

// spunTransport records the spun flag of every Poll.
type spunTransport struct {
	*loopTransport
	mu          sync.Mutex
	spun, fresh int // polls with spun set, and without
	first       bool
}

func (t *spunTransport) Poll(deferTx, spun bool) bool {
	t.mu.Lock()
	if t.spun+t.fresh == 0 {
		t.first = spun
	}
	if spun {
		t.spun++
	} else {
		t.fresh++
	}
	t.mu.Unlock()
	return t.loopTransport.Poll(deferTx, spun)
}

// TestCorePollsSpunUntilItSleeps: the core tells its transport that a
// poll follows the last one at once (spun) whenever it did not sleep in
// between, so the engine can tell a stall of the host from the core's own
// sleep (engine.Stack.PollLoop); its first poll and each poll after a
// sleep are not spun.
func TestCorePollsSpunUntilItSleeps(t *testing.T) {
	tr := &spunTransport{loopTransport: newLoopTransport(64 << 10)}
	cfg := smallConfig()
	cfg.SpinFor, cfg.MaxSpinFor, cfg.MaxSleep = 200*time.Microsecond, 200*time.Microsecond, 2*time.Millisecond
	h := startHarnessOn(t, cfg, ServerConfig{}, tr)
	time.Sleep(50 * time.Millisecond) // idle: spin, sleep, spin, ...
	h.stop()
	sleeps := h.core.stats.Sleeps // the core's goroutine has returned
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.first {
		t.Fatal("the core's first poll was marked spun")
	}
	if sleeps == 0 || tr.spun == 0 {
		t.Fatalf("%d sleeps and %d spun polls in 50 ms idle; want some of each", sleeps, tr.spun)
	}
	// Every sleep is followed by a poll that is not spun, unless the core
	// stopped right after it.
	if n := uint64(tr.fresh); n != sleeps+1 && n != sleeps {
		t.Fatalf("%d polls not spun after %d sleeps; want the first and one per sleep", n, sleeps)
	}
}

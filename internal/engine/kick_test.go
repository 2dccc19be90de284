package engine

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// kickLink is an in-memory link that behaves like AF_XDP: Transmit only
// queues frames, and they reach the peer at the next Kick. Each Kick
// records whether the stack's lock was free (the test drives the stack
// from one goroutine, so a held lock is the kicker's own).
type kickLink struct {
	*MemLink
	s *Stack

	mu        sync.Mutex
	held      [][]byte
	log       []string     // "tx" (Transmit with frames), "kick" (a Kick that sent), "rx" (Receive)
	kicks     atomic.Int32 // Kicks that delivered frames
	underLock atomic.Int32 // Kicks made with the stack's lock held
}

func (k *kickLink) Transmit(frames [][]byte) error {
	k.mu.Lock()
	for _, f := range frames {
		k.held = append(k.held, append([]byte(nil), f...))
	}
	if len(frames) > 0 {
		k.log = append(k.log, "tx")
	}
	k.mu.Unlock()
	return k.MemLink.Transmit(nil) // hands the buffers back
}

func (k *kickLink) Receive(frames [][]byte) int {
	k.mu.Lock()
	k.log = append(k.log, "rx")
	k.mu.Unlock()
	return k.MemLink.Receive(frames)
}

// takeLog returns the events since the last call.
func (k *kickLink) takeLog() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.log
	k.log = nil
	return l
}

func (k *kickLink) Kick() error {
	if s := k.s; s != nil {
		if s.mu.TryLock() {
			s.mu.Unlock()
		} else {
			k.underLock.Add(1)
		}
	}
	k.mu.Lock()
	held := k.held
	k.held = nil
	k.mu.Unlock()
	if len(held) > 0 {
		k.kicks.Add(1)
		k.mu.Lock()
		k.log = append(k.log, "kick")
		k.mu.Unlock()
		k.deliver(k.peer, held)
	}
	return nil
}

func (k *kickLink) queued() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.held)
}

func kickPair(t *testing.T, mode PollMode, noBackground bool) (a, b *Stack, ka, kb *kickLink) {
	t.Helper()
	la, lb := NewMemPipe(MemConfig{}, macA, macB)
	ka, kb = &kickLink{MemLink: la}, &kickLink{MemLink: lb}
	mk := func(l *kickLink, ip [4]byte, seed uint64) *Stack {
		s, err := New(Config{
			Link:         l,
			Endpoint:     ndp.Config{LocalIP: ip, Seed: seed},
			Resolver:     StaticResolver{ipA: macA, ipB: macB},
			Mode:         mode,
			NoBackground: noBackground,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b = mk(ka, ipA, 1), mk(kb, ipB, 2)
	if noBackground {
		ka.s, kb.s = a, b
	}
	return a, b, ka, kb
}

// The transmit kick (AF_XDP's sendto) is made after the stack's lock is
// released, never under it, and every call that transmitted has kicked by
// the time it returns: no frame waits on the link for someone else's kick.
func TestKickOutsideLock(t *testing.T) {
	for _, mode := range []PollMode{PollAdaptive, PollBusy} {
		t.Run(mode.String(), func(t *testing.T) {
			a, b, ka, kb := kickPair(t, mode, true)
			l, err := b.Listen(7, 0)
			if err != nil {
				t.Fatal(err)
			}
			c, err := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			req := bytes.Repeat([]byte("q"), 3000)
			buf := make([]byte, 4096)
			var sc *Conn
			for i := 0; i < 20; i++ {
				ka.takeLog()
				if _, err := c.Write(req, false, nil); err != nil {
					t.Fatal(err)
				}
				if n := ka.queued(); n != 0 {
					t.Fatalf("exchange %d: %d frames left unkicked after Write returned", i, n)
				}
				// Nothing else spins on the stack: the request is
				// kicked before the Write's poll takes arrivals in.
				if log := ka.takeLog(); len(log) < 2 || log[0] != "tx" || log[1] != "kick" {
					t.Fatalf("exchange %d: Write's link calls %v, want the data's transmit and its kick first", i, log)
				}
				if sc == nil {
					if sc, err = l.Accept(nil); err != nil {
						t.Fatal(err)
					}
				}
				for got := 0; got < len(req); {
					n, err := sc.Read(buf, nil)
					if err != nil {
						t.Fatal(err)
					}
					got += n
				}
				if _, err := sc.Write(req, false, nil); err != nil {
					t.Fatal(err)
				}
				if n := kb.queued(); n != 0 {
					t.Fatalf("exchange %d: %d server frames left unkicked after Write returned", i, n)
				}
				for got := 0; got < len(req); {
					n, err := c.Read(buf, nil)
					if err != nil {
						t.Fatal(err)
					}
					got += n
				}
			}
			c.Close()
			sc.Close()
			a.Poll()
			b.Poll()
			if n := ka.underLock.Load() + kb.underLock.Load(); n != 0 {
				t.Fatalf("%d kicks made with the stack's lock held", n)
			}
			if ka.kicks.Load() < 20 || kb.kicks.Load() < 20 {
				t.Fatalf("kicks that sent frames: client %d, server %d, want at least one per exchange", ka.kicks.Load(), kb.kicks.Load())
			}
		})
	}
}

// Concurrent callers, each kicking after its own lock section: every frame
// still leaves (one goroutine's kick sends what others queued, or their own
// kicks do), with the background pollers on.
func TestKickConcurrentEcho(t *testing.T) {
	for _, mode := range []PollMode{PollAdaptive, PollBusy} {
		t.Run(mode.String(), func(t *testing.T) {
			a, b, _, _ := kickPair(t, mode, false)
			l, err := b.Listen(7, 0)
			if err != nil {
				t.Fatal(err)
			}
			echoServer(t, l)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 50; i++ {
						req := []byte(fmt.Sprintf("g%d call %d %s", g, i, bytes.Repeat([]byte{'x'}, i*53)))
						resp, err := call(a, ipB, 7, req)
						if err == nil && !bytes.Equal(resp, req) {
							err = fmt.Errorf("got %d bytes, want %d", len(resp), len(req))
						}
						if err != nil {
							errs <- fmt.Errorf("goroutine %d call %d: %w", g, i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}

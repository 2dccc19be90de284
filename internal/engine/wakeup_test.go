package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// gatedLink holds received frames back until its gate opens: the test
// chooses which Receive call first sees the peer's ACKs.
type gatedLink struct {
	*MemLink
	calls    atomic.Int32
	openAt   atomic.Int32 // the Receive call (1-based, counted from arm) that opens the gate; 0: open
	armed    atomic.Bool
	released atomic.Bool
}

func (g *gatedLink) Receive(frames [][]byte) int {
	if g.armed.Load() && !g.released.Load() {
		if g.calls.Add(1) < g.openAt.Load() {
			return 0
		}
		g.released.Store(true)
	}
	return g.MemLink.Receive(frames)
}

// A waiter must not lose the event that ends its wait when that event comes
// from the poll the waiter runs itself in the iteration in which it decides
// to block: here the peer's ACKs, which free the send buffer, are first
// seen by the N-th Receive on the writer's stack after it filled the
// buffer, for each N, while another goroutine is the stack's link sleeper
// (so the writer waits on its channel); besides the writer only a slow
// outside poller polls, so for some N the writer's own poll in its
// blocking iteration is the one. A channel made after that poll would
// miss the EventWritable, and with everything acknowledged no further
// event comes: the writer would block forever (docs/decisions.md,
// "Lazy wait channels").
func TestNoLostWakeupOnBlock(t *testing.T) {
	for n := int32(1); n <= 8; n++ {
		t.Run(fmt.Sprint("receive", n), func(t *testing.T) {
			la, lb := NewMemPipe(MemConfig{}, macA, macB)
			g := &gatedLink{MemLink: la}
			mk := func(l Link, ip [4]byte, seed uint64) *Stack {
				s, err := New(Config{
					Link:     l,
					Endpoint: ndp.Config{LocalIP: ip, Seed: seed, SendBuffer: 4 << 10},
					Resolver: StaticResolver{ipA: macA, ipB: macB},
					Mode:     PollAdaptive,
					Spin:     time.Nanosecond,
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			a, b := mk(g, ipA, 1), mk(lb, ipB, 2)
			l, err := b.Listen(9, 0)
			if err != nil {
				t.Fatal(err)
			}
			const size = 6 << 10
			done := make(chan error, 1)
			go func() {
				c, err := l.Accept(nil)
				if err != nil {
					done <- err
					return
				}
				got := 0
				buf := make([]byte, size)
				for got < size {
					k, err := c.Read(buf, nil)
					got += k
					if err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			c, err := a.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Stand in for a goroutine sleeping on the link: the writer
			// then blocks on its channel, and nobody but the writer
			// polls this stack.
			a.linkWaiter.Store(true)
			// A slow outside poller, so a writer that blocked before the
			// gate opened is woken the normal way (its channel exists).
			stopPoll := make(chan struct{})
			defer close(stopPoll)
			go func() {
				for {
					select {
					case <-stopPoll:
						return
					case <-time.After(200 * time.Microsecond):
						a.Poll()
					}
				}
			}()
			g.openAt.Store(n)
			g.armed.Store(true)
			cancel := make(chan struct{})
			timer := time.AfterFunc(3*time.Second, func() { close(cancel) })
			defer timer.Stop()
			_, err = c.Write(make([]byte, size), true, cancel)
			a.linkWaiter.Store(false)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the writer missed its wakeup: blocked 3 s with the ACKs freeing its buffer already handled (gate opened at Receive %d)", n)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

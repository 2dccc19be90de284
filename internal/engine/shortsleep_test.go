package engine

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// countingLink counts a stack's polls of its link (Receive calls) and its
// sleeps for deadlines closer than minLinkSleep.
type countingLink struct {
	*MemLink
	receives    atomic.Int64
	shortSleeps atomic.Int64
}

func (c *countingLink) Receive(frames [][]byte) int {
	c.receives.Add(1)
	return c.MemLink.Receive(frames)
}

func (c *countingLink) Wait(timeout time.Duration) error {
	if timeout > 0 && timeout <= minLinkSleep {
		c.shortSleeps.Add(1)
	}
	return c.MemLink.Wait(timeout)
}

// A stack that never spins sleeps until its pull pacer's next slot, however
// close, instead of polling through it: a receiver pulling at 80 Mb/s one
// slot per release (a release every 150 µs) sleeps between releases, and
// polls its link a few times per pulled packet, not continuously.
func TestNeverSpinningReceiverSleepsBetweenPullSlots(t *testing.T) {
	var rl *countingLink
	snd, rcv, _, _ := memPair(t, PollAdaptive, func(c *Config) {
		c.Spin, c.LinkRate, c.PullBatch = -1, 80e6, 1
		if c.Endpoint.LocalIP == ipB {
			rl = &countingLink{MemLink: c.Link.(*MemLink)}
			c.Link = rl
		}
	})
	l, err := rcv.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	const size = 600 << 10 // beyond the first window: most of it pulled
	go func() {
		c, err := snd.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
		if err != nil {
			return
		}
		c.Write(make([]byte, size), true, nil)
	}()
	c, err := l.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel := make(chan struct{})
	defer time.AfterFunc(10*time.Second, func() { close(cancel) }).Stop()
	got := 0
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf, cancel)
		got += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
	}
	if got != size {
		t.Fatalf("read %d bytes, want %d", got, size)
	}
	pulled := rcv.Stats().Endpoint.PullsOut
	polls, short := rl.receives.Load(), rl.shortSleeps.Load()
	t.Logf("%d PULLs, %d polls, %d sleeps under %v", pulled, polls, short, minLinkSleep)
	if short == 0 {
		t.Errorf("no sleep for a deadline under %v in %d PULLs: the stack polled through its pull slots", minLinkSleep, pulled)
	}
	if polls > 20*int64(pulled) {
		t.Errorf("%d polls of the link for %d PULLs: the stack polled through its pull slots", polls, pulled)
	}
}

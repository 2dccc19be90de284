package engine

import (
	"context"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// TestPollAllocs: moving data through two stacks in steady state (write,
// Poll batches on both sides, read) allocates nothing: no per-packet or
// per-batch allocation in the core loop, the in-memory link or the endpoint.
func TestPollAllocs(t *testing.T) {
	a, b, _, _ := memPair(t, PollAdaptive, func(c *Config) { c.NoBackground = true })
	l, err := b.Listen(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 32<<10)
	rbuf := make([]byte, 64<<10)
	if _, err := c.Write(chunk[:1], false, nil); err != nil {
		t.Fatal(err)
	}
	sc, err := l.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	pump := func() {
		if _, err := c.Write(chunk, false, nil); err != nil {
			t.Fatal(err)
		}
		got := 0
		for i := 0; got < len(chunk) && i < 10000; i++ {
			a.Poll()
			b.Poll()
			if sc.Readable() > 0 {
				n, err := sc.Read(rbuf, nil)
				if err != nil {
					t.Fatal(err)
				}
				got += n
			}
		}
		if got < len(chunk) {
			t.Fatalf("only %d of %d bytes arrived", got, len(chunk))
		}
	}
	for i := 0; i < 20; i++ { // warm up: pools, maps and queues at their steady size
		pump()
	}
	if n := testing.AllocsPerRun(50, pump); n != 0 {
		t.Errorf("%v allocations per 32 KiB moved through Poll, want 0", n)
	}
}

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

// TestDataFirst: a small batch leaves with DATA frames first, control frames
// after, each group in the endpoint's order, and the link sends exactly the
// buffers the frames were built in.
func TestDataFirst(t *testing.T) {
	la, lb := NewMemPipe(MemConfig{}, macA, macB)
	s := &Stack{link: la, tx: make([][]byte, 8)}
	mk := func(typ ndp.PacketType, tag byte) []byte {
		b := make([]byte, ndpHeaderOffset+4)
		b[ndpHeaderOffset+1] = byte(typ)
		b[len(b)-1] = tag
		return b
	}
	in := [][]byte{mk(ndp.TypeAck, 1), mk(ndp.TypePull, 2), mk(ndp.TypeData, 3), mk(ndp.TypeAck, 4), mk(ndp.TypeData, 5)}
	k := la.AllocTx(s.tx[:len(in)])
	if k != len(in) {
		t.Fatal(k)
	}
	for i, f := range in {
		s.tx[i] = append(s.tx[i][:0], f...)
	}
	s.dataFirst(len(in))
	if err := la.Transmit(s.tx[:len(in)]); err != nil {
		t.Fatal(err)
	}
	got := make([][]byte, 8)
	n := lb.Receive(got)
	var tags []byte
	for _, f := range got[:n] {
		tags = append(tags, f[len(f)-1])
	}
	if string(tags) != string([]byte{3, 5, 1, 2, 4}) {
		t.Fatalf("order %v, want [3 5 1 2 4]", tags)
	}
}

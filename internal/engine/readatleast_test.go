package engine

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// ReadAtLeast returns only once its threshold (at most a quarter of the
// receive buffer) is buffered or the stream ended, whatever the timing of
// the peer's small writes, and loses no byte.
func TestReadAtLeastWaitsForItsThreshold(t *testing.T) {
	a, b, _, _ := memPair(t, PollAdaptive, func(c *Config) { c.Endpoint.RecvBuffer, c.Spin = 64<<10, -1 })
	l, err := b.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	const size, threshold = 100 << 10, 16 << 10 // threshold: RecvBuffer/4
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + i>>10)
	}
	sent := make(chan error, 1)
	go func() {
		c, err := a.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
		if err != nil {
			sent <- err
			return
		}
		for off := 0; off < size; off += 1000 { // small writes, each its own packet
			if _, err := c.Write(want[off:min(off+1000, size)], off+1000 >= size, nil); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	c, err := l.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel := make(chan struct{})
	defer time.AfterFunc(10*time.Second, func() { close(cancel) }).Stop()
	got := make([]byte, 0, size)
	buf := make([]byte, 48<<10)
	for {
		n, err := c.ReadAtLeast(buf, len(buf), cancel)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
		if n < threshold && len(got) < size {
			t.Fatalf("ReadAtLeast returned %d bytes (%d of %d so far), threshold %d, before the stream ended", n, len(got), size, threshold)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%d bytes read, differ from the %d sent", len(got), size)
	}
}

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

// ReadAtLeast returns the bytes that end a stream with io.EOF (a message
// reader needs no further call to learn the end); Read returns them with
// nil and io.EOF on the next call; bytes that do not end the stream come
// with nil.
func TestReadAtLeastEOFWithLastBytes(t *testing.T) {
	a, b, _, _ := memPair(t, PollBusy, func(c *Config) { c.NoBackground = true })
	l, err := b.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	msg := bytes.Repeat([]byte("m"), 3000)
	for _, tc := range []struct {
		name     string
		fin      bool
		atLeast  int
		wantErrs []error // per call, until the stream's bytes and end are read
	}{
		{"ReadAtLeast to the end", true, len(msg), []error{io.EOF}},
		{"Read to the end", true, 1, []error{nil, io.EOF}},
		{"ReadAtLeast without FIN", false, len(msg), []error{nil}},
	} {
		c, err := a.Dial(context.Background(), ipB, 9, ndp.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(msg, tc.fin, nil); err != nil {
			t.Fatal(err)
		}
		sc, err := l.Accept(nil)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		// Wait for the whole message, FIN included, to be buffered.
		for sc.Readable() < len(msg) || (tc.fin && !b.ep.ReadEnded(sc.h)) {
			b.Poll()
		}
		got := 0
		for i, want := range tc.wantErrs {
			p := buf[min(got, len(buf)-1):]
			var n int
			var err error
			if tc.atLeast == 1 {
				n, err = sc.Read(p, nil)
			} else {
				n, err = sc.ReadAtLeast(p, tc.atLeast, nil)
			}
			got += n
			if err != want {
				t.Fatalf("%s: call %d returned %d bytes, %v; want %v", tc.name, i, n, err, want)
			}
		}
		if got != len(msg) {
			t.Fatalf("%s: read %d bytes, want %d", tc.name, got, len(msg))
		}
		sc.Abort()
		c.Abort()
	}
}

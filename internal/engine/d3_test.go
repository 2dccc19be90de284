package engine

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
)

// A D3 flow that is on track for its deadline is not quenched: the receiver
// reports progress to its pull queue, so the rate it needs for the bytes
// still missing stays within the link. Before, the queue never heard of
// progress, took the whole size as still to come, and quenched every flow
// whose deadline was less than twice its transfer time at link rate.
func TestDeadlineFlowOnTrackCompletes(t *testing.T) {
	// The receiver's pull pacer, not the CPU, must set the pace even under
	// -race on a loaded machine: 5 Mb/s, 256 KiB (about 180 packets) needs
	// 420 ms at it.
	const rate = 5e6
	a, b, _, _ := memPair(t, PollAdaptive, func(c *Config) {
		c.LinkRate = rate
		c.Policy = pullpacer.PolicyDeadline
	})
	l, err := b.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	const size = 256 << 10
	need := time.Duration(float64(size*8) / rate * float64(time.Second)) // ~420 ms
	deadline := a.Now() + ndp.Time(need*9/5)
	got := make(chan error, 1)
	go func() {
		c, err := l.Accept(nil)
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		_, err = readAll(c)
		got <- err
	}()
	c, err := a.Dial(context.Background(), ipB, 9, ndp.DialOptions{Size: size, Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Write(make([]byte, size), true, nil); err != nil {
		t.Fatalf("write: %v (after %v; the flow needs %v at link rate, deadline in %v)", err, time.Since(start), need, need*9/5)
	}
	if err := <-got; err != nil {
		t.Fatalf("read: %v (after %v; the flow needs %v at link rate, deadline in %v)", err, time.Since(start), need, need*9/5)
	}
	if q := b.Stats().Quenched; q != 0 {
		t.Fatalf("%d flows quenched", q)
	}
	t.Logf("256 KiB with a deadline of 1.8x its transfer time: done in %v (need %v)", time.Since(start), need)
}

// A D3 flow that delivered every byte before its deadline is never
// quenched, however long its connection stays open afterwards: a server
// that answers on the same connection after the request's deadline gets
// its answer through. A flow that cannot make its deadline is quenched,
// and both ends get ErrDeadlineUnmeetable.
func TestDeadlineFlowDoneIsNotQuenched(t *testing.T) {
	const rate = 100e6
	a, b, _, _ := memPair(t, PollAdaptive, func(c *Config) {
		c.LinkRate = rate
		c.Policy = pullpacer.PolicyDeadline
	})
	l, err := b.Listen(9, 0)
	if err != nil {
		t.Fatal(err)
	}
	// 256 KiB within 150 ms needs 14 Mb/s of the 100 Mb/s link.
	const size = 256 << 10
	const within = 150 * time.Millisecond
	served := make(chan error, 1)
	go func() {
		c, err := l.Accept(nil)
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		buf := make([]byte, size)
		if _, err := c.ReadAtLeast(buf, size, nil); err != nil && err != io.EOF {
			served <- err
			return
		}
		time.Sleep(2 * within) // past the request's deadline, then answer
		_, err = c.Write([]byte("answer"), true, nil)
		served <- err
	}()
	start := time.Now()
	c, err := a.Dial(context.Background(), ipB, 9, ndp.DialOptions{Size: size, Deadline: a.Now() + ndp.Time(within)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, size), true, nil); err != nil {
		t.Fatalf("write: %v after %v", err, time.Since(start))
	}
	got, err := readAll(c)
	if err != nil || string(got) != "answer" {
		t.Fatalf("client read %q, %v after %v (deadline %v); server %v, quenched %d", got, err, time.Since(start), within, <-served, b.Stats().Quenched)
	}
	if err := <-served; err != nil {
		t.Fatalf("server: %v", err)
	}
	if q := b.Stats().Quenched; q != 0 {
		t.Fatalf("a flow done %v before its deadline was quenched (%d)", within, q)
	}

	// The same size within 1 ms needs 2.1 Gb/s: quenched at once.
	c2, err := a.Dial(context.Background(), ipB, 9, ndp.DialOptions{Size: size, Deadline: a.Now() + ndp.Time(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept(nil)
		if err != nil {
			accepted <- err
			return
		}
		defer c.Close()
		_, err = readAll(c)
		accepted <- err
	}()
	_, err = c2.Write(make([]byte, size), true, nil)
	if err == nil {
		_, err = readAll(c2)
	}
	if !errors.Is(err, ndp.ErrDeadlineUnmeetable) {
		t.Fatalf("unmeetable deadline: client got %v, want ErrDeadlineUnmeetable", err)
	}
	if err := <-accepted; !errors.Is(err, ndp.ErrDeadlineUnmeetable) {
		t.Fatalf("unmeetable deadline: server got %v, want ErrDeadlineUnmeetable", err)
	}
	if q := b.Stats().Quenched; q != 1 {
		t.Fatalf("quenched %d flows, want 1", q)
	}
}

package engine

import (
	"context"
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

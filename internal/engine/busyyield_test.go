package engine

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// A lone PollBusy waiter lets other goroutines run every yieldEvery of
// its wait (await). Without that, a goroutine made runnable while it
// spins (a server goroutine an RPC client has just started, a peer
// stack's poller back from its sleep, this stack's own background poller)
// waited for a free P, and with every P taken by a spinner that is the Go
// runtime's forced preemption, 10 ms: a persistent-connection run's first
// request of a turn was answered 3-11 ms late and fired the client's RTO.
// Here one P and a reader that waits for data that never comes: the test
// goroutine's short sleeps end on time.
func TestBusyWaiterLetsOthersRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, b, _, _ := memPair(t, PollAdaptive, func(c *Config) {
		if c.Endpoint.LocalIP == ipA {
			c.Mode = PollBusy // the waiter; its peer polls adaptively
		}
	})
	c, _ := openConn(t, a, b, 100)
	cancel := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 100), cancel) // nothing comes: spins until cancel
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for a.spinners.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the reader never spun")
		}
		runtime.Gosched()
	}
	const sleep = 200 * time.Microsecond
	late := make([]time.Duration, 0, 20)
	for range cap(late) {
		t0 := time.Now()
		time.Sleep(sleep)
		late = append(late, time.Since(t0)-sleep)
	}
	close(cancel)
	if err := <-done; err == nil {
		t.Fatal("the reader returned without data or cancel")
	}
	slices.Sort(late)
	// Without the yield every sleep ends at the forced preemption, ~10 ms
	// late; with it within a few yieldEvery (60 µs), allowing for a
	// loaded machine and the race detector.
	if med := late[len(late)/2]; med > 3*time.Millisecond {
		t.Fatalf("sleeps of %v beside a lone busy waiter ended %v late (median; all %v)", sleep, med, late)
	}
}

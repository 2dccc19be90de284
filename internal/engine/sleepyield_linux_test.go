package engine

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadWaitLink is a MemLink whose Wait blocks its thread in ppoll(2) for
// the whole timeout, holding its P, as XDPLink's Wait does (it ignores
// arrivals; nothing arrives in the test that uses it).
type threadWaitLink struct{ *MemLink }

func (l threadWaitLink) Wait(d time.Duration) error {
	if d < 0 {
		d = 100 * time.Millisecond
	}
	ts := unix.NsecToTimespec(int64(d))
	unix.Ppoll(nil, &ts, nil)
	return nil
}

// A goroutine about to sleep on a link that blocks its thread (ppoll)
// lets the goroutines readied onto its P run first. Without that, a
// goroutine it had just readied waited in the P's run queue until the
// runtime's sysmon took the P back from the syscall; a waiter that sleeps
// 1 ms at a time enters a new syscall before sysmon (every 10 ms once the
// process looks idle) sees the same one twice, so that can be never. In
// `ndpperf rpc --conn persistent` (adaptive) the server's echo goroutine,
// readied by the server's background poller just before its ppoll, ran
// 13.4 ms later while the client's Read slept 1 ms at a time on the other
// P, long past the client's RTO. Here one P: a goroutine starts another
// and then waits for data that never comes, sleeping on the link itself;
// the started goroutine runs within the spin window (11-19 ms before).
func TestLinkSleepLetsReadiedRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, b, _, _ := memPair(t, PollAdaptive, func(c *Config) {
		// The window as it is after an idle spell (the default Spin,
		// below yieldEvery: a spin that short never yields).
		c.Spin, c.MaxSpin = 50*time.Microsecond, 50*time.Microsecond
		// The waiter itself sleeps on the link (no background poller
		// holding it), as the client's Read did at the turn start.
		c.NoBackground = true
		if c.Endpoint.LocalIP == ipA {
			c.Link = threadWaitLink{c.Link.(*MemLink)}
		}
	})
	c, _ := openConn(t, a, b, 100)
	const rounds = 10
	late := make([]time.Duration, 0, rounds)
	buf := make([]byte, 100)
	for range rounds {
		// Busy without syscalls first, as the harness's other transport's
		// turn keeps the process: sysmon, finding nothing to retake, backs
		// off to its longest period (10 ms). (A process idle on every P
		// instead puts sysmon to sleep, and its wakeup resets the period.)
		for t0 := time.Now(); time.Since(t0) < 40*time.Millisecond; {
		}
		ran := make(chan time.Duration, 1)
		done := make(chan error, 1)
		cancel := make(chan struct{})
		go func() {
			started := make(chan struct{})
			t0 := time.Now()
			go func() {
				ran <- time.Since(t0)
				close(started)
			}()
			_, err := c.Read(buf, cancel) // nothing comes: waits until cancel
			done <- err
		}()
		select {
		case d := <-ran:
			late = append(late, d)
		case <-time.After(time.Second):
			late = append(late, time.Second) // still not run
		}
		close(cancel)
		if err := <-done; err == nil {
			t.Fatal("the reader returned without data or cancel")
		}
	}
	slices.Sort(late)
	// Without the yield the started goroutine ran when sysmon retook the
	// P, milliseconds later; with it after the spin window (50 µs, up to
	// MaxSpin), allowing for a loaded machine and the race detector.
	if med := late[len(late)/2]; med > 1500*time.Microsecond {
		t.Fatalf("a goroutine started before a link sleep ran %v late (median; all %v)", med, late)
	}
}

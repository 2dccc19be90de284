package daemon

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/eventfd"
	"golang.org/x/sys/unix"
)

// How an application waits (run to completion, no poller goroutine)
//
// There is no background goroutine consuming the event, completion and RX
// rings: the goroutine that waits (Read, Accept, a Write out of frames, a
// Listen reply) polls them itself under pollMu, so the bytes it waits for
// need no thread handoff inside the application. Each waiter loops:
//
//  1. poll once if pollMu is free (TryLock), then check its condition;
//  2. spin (ClientConfig.SpinFor, runtime.Gosched between polls);
//  3. sleep. One waiter at a time, the designated sleeper (token
//     c.sleeping), sleeps on the region's WakeApp eventfd with ring's
//     wakeup protocol; every other waiter parks on its own channel, which
//     whoever polls signals when its socket gets something. A sleeper
//     that leaves while others are parked passes the token on (tokFree).
//
// The sleeper's protocol is ring's (ring/wake_linux.go), with the app's
// sleep word used as two counts (atomic adds) rather than a flag: sleepers
// in the low half, writers waiting for TX frames in the high half. The
// daemon's Notifier reads the half that matches what it produced
// (proto.go, wakeReason): data and events wake a sleeper, completions only
// while a writer waits for frames. A writer that registers while the
// sleeper is already in ppoll and whose own poll cannot run (another
// goroutine polls at that moment) waits at most sleepSlice for its frames:
//
//	S1 add 1 to appSleeping     S2 poll the rings afresh (or give up if
//	S3 ppoll(WakeApp, intr)        another goroutine polls right now)
//	S4 add -1
//
// The intr eventfd wakes the sleeper for Close and daemon death; a
// caller's cancel channel is checked between sleeps of at most
// sleepSlice, so a cancellation (a sockapi deadline) is seen within it.
const sleepSlice = 2 * time.Millisecond

// goschedEvery is how often a spinning waiter lets the other goroutines of
// its process run (runtime.Gosched); between, it yields only the CPU.
const goschedEvery = time.Millisecond

// spinner is one waiter's spin: it lasts the spin window from its first
// poll, and lets the process's other goroutines run (runtime.Gosched) once
// per goschedEvery of spinning, not on every poll: runtime.Gosched on a
// goroutine locked to its thread (a benchmark's pinned thread, an
// application's polling thread) hands the P to another thread and back,
// two thread wakeups (10-20 µs each on a 2-vCPU VM), which made a spinning
// application's every wait slower than sleeping (docs/latency.md).
type spinner struct {
	start, lastGosched time.Time
}

// next reports, at now, whether the waiter still spins (window from its
// first poll) and whether it should call runtime.Gosched this time.
func (s *spinner) next(now time.Time, window time.Duration) (spin, gosched bool) {
	if s.start.IsZero() {
		s.start = now
		if s.lastGosched.IsZero() {
			s.lastGosched = now
		}
	}
	if now.Sub(s.start) >= window {
		return false, false
	}
	if now.Sub(s.lastGosched) >= goschedEvery {
		s.lastGosched = now
		return true, true
	}
	return true, false
}

// reset starts a new spin window (after a sleep or a park); the Gosched
// clock carries on.
func (s *spinner) reset() { s.start = time.Time{} }

// pollLocked runs one batch over every ring this side consumes. pollMu held.
func (c *Client) pollLocked() bool {
	if c.dead {
		return false
	}
	return c.pollOnce()
}

// tryPoll polls if nobody else is; it reports whether it could.
func (c *Client) tryPoll() (polled, work bool) {
	if !c.pollMu.TryLock() {
		return false, false
	}
	work = c.pollLocked()
	c.pollMu.Unlock()
	return true, work
}

// waitFor blocks until ready() holds (checked after every poll), ch is
// signalled, or one of: closeCh closes (net.ErrClosed), the daemon goes
// (ErrDaemonGone / ErrClientClosed), cancel closes (ErrCanceled), deadline
// passes (os.ErrDeadlineExceeded). ch may be nil.
func (c *Client) waitFor(ready func() bool, ch <-chan struct{}, closeCh <-chan struct{}, deadline time.Time, cancel <-chan struct{}) error {
	defer c.passToken()
	var sp spinner
	for {
		select {
		case <-c.gone:
			return c.goneErr()
		case <-closeCh:
			return errClosed
		case <-cancel:
			return ErrCanceled
		default:
		}
		c.tryPoll()
		if ready() {
			return nil
		}
		now := time.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			return errDeadline
		}
		if c.cfg.SpinFor > 0 {
			if spin, gosched := sp.next(now, c.cfg.SpinFor); spin {
				// Give the CPU to other threads (the daemon's core loop,
				// when it shares this CPU) with sched_yield, and to the
				// other goroutines of this process only every
				// goschedEvery (spinner).
				yieldCPU()
				if gosched {
					runtime.Gosched()
				}
				continue
			}
		}
		if c.sleeping.CompareAndSwap(false, true) {
			c.sleepOnRings(ready, deadline)
			c.sleeping.Store(false)
			if c.parked.Load() > 0 {
				signalChan(c.tokFree)
			}
			sp.reset()
			continue
		}
		// Someone else sleeps on the eventfd and polls for everybody.
		c.parked.Add(1)
		if !c.sleeping.Load() {
			c.parked.Add(-1) // the sleeper just left: take its place
			continue
		}
		err := c.park(ch, closeCh, deadline, cancel)
		c.parked.Add(-1)
		if err != nil {
			return err
		}
		sp.reset()
	}
}

// passToken runs when a waiter leaves waitFor. A parked waiter woken by
// tokFree holds the sleeper role even if it then finds its condition met
// and returns; if others are still parked and nobody sleeps, the role must
// be handed on, or they wait with nobody polling the rings for them.
// (An extra token only costs a parked waiter a spurious wakeup.)
func (c *Client) passToken() {
	if c.parked.Load() > 0 && !c.sleeping.Load() {
		signalChan(c.tokFree)
	}
}

func (c *Client) park(ch, closeCh <-chan struct{}, deadline time.Time, cancel <-chan struct{}) error {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ch:
	case <-c.tokFree:
	case <-closeCh:
		return errClosed
	case <-c.gone:
		return c.goneErr()
	case <-cancel:
		return ErrCanceled
	case <-timeout:
		return errDeadline
	}
	return nil
}

// sleepOnRings is the designated sleeper's S1-S4.
func (c *Client) sleepOnRings(ready func() bool, deadline time.Time) {
	atomic.AddUint32(c.sleepWord, 1) // S1
	defer atomic.AddUint32(c.sleepWord, ^uint32(0))
	polled, work := c.tryPoll() // S2: loads every producer index afresh
	if !polled || work || ready() {
		return
	}
	timeout := sleepSlice
	if !deadline.IsZero() {
		timeout = min(timeout, time.Until(deadline))
		if timeout <= 0 {
			return
		}
	}
	fds := [2]unix.PollFd{{Fd: int32(c.wakeFD), Events: unix.POLLIN}, {Fd: int32(c.intrFD), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(int64(timeout))
	if _, err := unix.Ppoll(fds[:], &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
		return
	}
	for _, p := range fds {
		if p.Revents&unix.POLLIN != 0 {
			eventfd.Drain(int(p.Fd))
		}
	}
}

// interrupt wakes the designated sleeper (Close, daemon death).
func (c *Client) interrupt() {
	eventfd.Signal(c.intrFD)
}

func signalChan(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

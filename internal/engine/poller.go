package engine

import (
	"errors"
	"os"
	"runtime"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// How waiting works (the lead's architecture, engine-contract.md): the
// goroutine that waits drives the stack itself. Each blocking call loops:
// take the lock, check its condition, Poll once, check again, drop the lock.
// Between iterations await decides whether to spin on (PollBusy always;
// PollAdaptive for Config.Spin) or block on the call's channel until an
// event for it (signal) or cancellation. While an application goroutine
// spins, the background poller stays out of its way (it would only contend
// for the lock); it takes over when application goroutines block or stop
// calling, and sleeps on the link once the stack is idle.

// appGrace is how long after an application goroutine's last Poll the
// background poller keeps out of the way.
const appGrace = ndp.Time(time.Millisecond)

// errDone: the call's done channel closed (local Close or Stack.Close).
var errDone = errors.New("engine: done")

type waitState struct {
	now       ndp.Time // the caller's clock reading of this iteration, for await (0: none)
	start     ndp.Time
	yields    ndp.Time // yields made in this spin (await)
	spinning  bool
	spun      bool // the last await spun on: the next poll follows at once (spinPollLocked)
	wantBlock bool // await wants to block: the caller makes its channels (Conn.waitChanLocked)
}

// await is called, without the lock, when a blocking call's condition does
// not hold yet. It returns nil to make the caller check again.
func (s *Stack) await(w *waitState, ch chan struct{}, done, cancel <-chan struct{}) error {
	// Two one-channel checks, not one select over both: a non-blocking
	// receive from an open, empty channel is a lock-free load, while a
	// multi-case select locks every channel, and this runs on every spin.
	if isClosed(done) {
		s.endWait(w)
		return errDone
	}
	if isClosed(cancel) {
		s.endWait(w)
		return os.ErrDeadlineExceeded
	}
	now := w.now
	w.now, w.spun = 0, false
	if now == 0 {
		now = s.clock()
	}
	if w.start == 0 {
		w.start = now
	}
	if s.cfg.Mode == PollBusy || now-w.start < ndp.Time(s.spin.Load()) {
		if !w.spinning {
			w.spinning = true
			s.spinners.Add(1)
		}
		s.appPollAt.Store(int64(now))
		// Let other goroutines run between polls when this one is not the
		// stack's only spinner: with more spinners than cores the Go
		// scheduler otherwise preempts only every 10ms. A lone spinner
		// (busy, or adaptive while its window lasts, which may grow to
		// MaxSpin) yields every yieldEvery of spinning, not on every poll:
		// for a goroutine locked to its thread a yield is a thread handoff
		// costing tens of µs, which on every poll made each adaptive RPC
		// wait as long as kernel TCP's. Never yielding held its P for good:
		// a goroutine readied meanwhile (a server goroutine the client has
		// just started, a peer stack's poller back from its sleep) waited
		// for the runtime's forced preemption, 10 ms, when every P spun
		// (TestBusyWaiterLetsOthersRun, docs/latency.md).
		//
		// A lone spinner whose waits are each shorter than yieldEvery (an
		// exchange of 15-30 µs) never reaches that yield: its window
		// starts again with every call, so a goroutine in a loop of Write
		// and Read held its P across calls until the runtime's forced
		// preemption (10 ms), and goroutines readied onto that P meanwhile
		// waited that long (the other P, never short of goroutines from
		// the global run queue, does not steal them). `ndpperf rpc --conn
		// persistent --clients 8` starts its clients together onto one P;
		// the first became its stack's only spinner and made 500-1,000
		// exchanges in a row while the other 7 waited runnable, and the
		// busiest client of a run made 1.3-2.9x an even share (runtime
		// trace, docs/latency.md). So a lone spinner on a stack whose
		// other connections other goroutines may be about to use yields
		// once per yieldEvery across its calls too (yieldedAt). With one
		// connection it does not: ndpperf pins a single client's goroutine
		// to its thread, for which a yield is a thread handoff of tens of
		// µs (the stacks' background pollers, readied when a call ends,
		// are always runnable beside it), and a yield every 60 µs there
		// took the one-client p50 from 12 to 20 µs.
		if s.spinners.Load() > 1 || now-w.start >= (w.yields+1)*yieldEvery ||
			(s.appConns.Load() > 1 && now-ndp.Time(s.yieldedAt.Load()) >= yieldEvery) {
			w.yields++
			s.yieldedAt.Store(int64(now))
			runtime.Gosched()
		}
		w.spun = true
		return nil
	}
	// Sleep. The first choice is to sleep on the link itself (ppoll on the
	// XSK fd and the wake eventfd): the kernel wakes this thread directly
	// when a frame arrives, and a thread that slept gets the scheduler's
	// wakeup preference over spinners. Only one goroutine sleeps on the
	// link at a time (linkWaiter); the rest block on their channel while
	// the link sleeper (or the background poller) polls for them.
	if s.linkWaiter.CompareAndSwap(false, true) {
		// This goroutine stays the stack's poller while it sleeps (it
		// keeps its spinner count, so the background poller stays out of
		// the way and cannot consume the frames meant to wake it).
		if !w.spinning {
			w.spinning = true
			s.spinners.Add(1)
		}
		s.sleepOnLink(linkSleepCap)
		s.linkWaiter.Store(false)
		w.start, w.yields = s.clock(), 0
		return nil // the caller polls and checks again
	}
	s.endWait(w)
	if s.cfg.NoBackground {
		// Nobody else would poll for a blocked goroutine: keep spinning.
		runtime.Gosched()
		w.spun = true
		return nil
	}
	if ch == nil {
		// The caller has no channel yet: it makes one under the lock and
		// checks its condition once more before blocking.
		w.wantBlock = true
		return nil
	}
	s.blocked.Add(1)
	if s.spinners.Load() == 0 {
		s.appPollAt.Store(0)
		signal(s.bgKick)
	}
	var err error
	select {
	case <-ch:
	case <-done:
		err = errDone
	case <-cancel:
		err = os.ErrDeadlineExceeded
	}
	s.blocked.Add(-1)
	w.start, w.yields = s.clock(), 0 // spin again for a while after a wakeup
	return err
}

// lockWaiter takes the stack's lock for a blocking call's next iteration,
// except that a spinning waiter that finds it held does not queue for it:
// it reports false, and the caller treats the iteration as one whose
// condition did not hold (await: yield, and check again). The holder is
// polling, for this waiter too, and a goroutine queued on the mutex is
// parked and later readied onto the holder's P, which may then sit in a
// transmit kick (a syscall) while the readied goroutine waits behind it.
func (s *Stack) lockWaiter(w *waitState) bool {
	if w.spinning {
		if s.mu.TryLock() {
			return true
		}
		if s.spinners.Load() <= 1 {
			// await yields only between several spinners; the holder
			// may be waiting for this P.
			runtime.Gosched()
		}
		return false
	}
	s.mu.Lock()
	return true
}

// isClosed reports whether ch is closed (nil: never). Only for channels
// that are closed, never sent to (done, cancel).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// adaptSpin tunes the adaptive spin window from how a sleep on the link
// went (slept for, out of at most limit). A sleep cut short by traffic
// well within the window's reach means the peer was only a little slower
// than the window, and sleeping cost a wakeup (tens of µs on a loaded
// machine) on every exchange: a bulk transfer whose two ends take turns
// that way ran at a quarter of its speed. The window doubles, up to
// MaxSpin. A sleep that lasted (or timed out) well past the window means
// the stack is idle: the window halves back toward Spin, so an idle stack
// costs a spin of Spin per wakeup again.
func (s *Stack) adaptSpin(slept, limit ndp.Time) {
	if s.cfg.Spin < 0 {
		return // never spins
	}
	cur := s.spin.Load()
	switch {
	case slept < ndp.Time(cur) && slept < limit:
		s.spin.Store(min(2*cur, int64(s.cfg.MaxSpin)))
	case slept > 8*ndp.Time(cur) || slept >= limit:
		s.spin.Store(max(cur/2, int64(s.cfg.Spin)))
	}
}

// yieldEvery is how often a lone spinner lets other goroutines
// run. For a goroutine locked to its thread a yield is a thread handoff
// (the P goes to another thread, which finds only the locked goroutine and
// hands the P back: two futex wakeups, tens of µs on a loaded VM). Every
// 20 µs, a 64 KiB exchange's waits (the peer's 45-frame kick, 150-300 µs)
// paid several, and its p50 was 20-30% higher (docs/latency.md); every
// 60 µs a goroutine sharing the P still runs within 60 µs of a spin's start.
const yieldEvery = ndp.Time(60 * time.Microsecond)

// minLinkSleep: deadlines closer than this are spun for, not slept for, by
// a stack whose waiters spin (Config.Spin >= 0): its link sleeps in ppoll,
// and a short ppoll timeout oversleeps by the thread's timer slack (50 µs
// by default), which would space PULLs 50 µs apart instead of a packet
// time. A stack that never spins sleeps for every deadline (minSleep).
const minLinkSleep = 200 * time.Microsecond

// linkSleepCap bounds an application goroutine's sleep on the link, so a
// deadline (a channel the link cannot watch) is noticed within it.
const linkSleepCap = time.Millisecond

// sleepOnLink polls once and, if there was nothing to do, sleeps on the
// link until frames arrive, Wake, the next timer / pull release, or limit.
// The caller holds linkWaiter.
func (s *Stack) sleepOnLink(limit time.Duration) {
	s.sleeping.Store(true)
	s.mu.Lock()
	now := s.clock()
	s.selfPoll = true
	did := s.pollLocked(now) // anything queued before sleeping was announced
	s.selfPoll = false
	d := s.sleepForLocked(now)
	closed := s.closed
	s.unlock()
	if !closed && !did && (d < 0 || d > s.minSleep()) {
		if d < 0 || d > limit {
			d = limit
		}
		if s.cfg.Spin >= 0 {
			// The link's Wait blocks this thread in ppoll holding its P
			// (XDPConfig.RuntimeWait is for stacks that never spin), and
			// a goroutine readied onto that P before the sleep (one this
			// goroutine just woke or started) waits until sysmon takes the
			// P back: never, while a waiter sleeps 1 ms at a time (each
			// ppoll a new syscall to sysmon, which looks every 10 ms once
			// the process seems idle). In `ndpperf rpc --conn persistent`
			// the server's echo goroutine, readied by the server's
			// background poller before its ppoll, ran 13.4 ms late while
			// the client slept on the other P, long past the client's RTO
			// (TestLinkSleepLetsReadiedRun, docs/latency.md). Let it run
			// first; a frame that arrives meanwhile ends the sleep at once.
			runtime.Gosched()
		}
		t0 := s.clock()
		s.link.Wait(d)
		s.wakeups.Add(1)
		s.adaptSpin(s.clock()-t0, ndp.Time(d))
	}
	s.sleeping.Store(false)
}

// minSleep is the shortest deadline sleepOnLink sleeps for; closer ones
// are polled for. A stack whose waiters spin polls through deadlines under
// minLinkSleep (and its spin). A stack that never spins (Config.Spin < 0,
// its link parked in the Go runtime's netpoller) sleeps for any deadline:
// polling through the pull pacer's next slot (98 µs apart at 1 Gb/s with
// PullBatch 8) kept its goroutine on a CPU without a yield, which in the
// 8 x 1 MB incast through ndpswitch at 1 Gb/s was a third of the process's
// CPU on two CPUs shared with the servers and the switch
// (docs/datapath.md, "A round's CPU at 1 Gb/s").
func (s *Stack) minSleep() time.Duration {
	if s.cfg.Spin < 0 {
		return 0
	}
	return max(time.Duration(s.cfg.Spin), minLinkSleep)
}

// endWait ends a spin phase. When the last spinner leaves, the background
// poller takes over at once (it would otherwise keep out of the way for
// appGrace): pulls still to release, data still to send after a Write
// returned, or goroutines blocked on channels need a poller now.
func (s *Stack) endWait(w *waitState) {
	if !w.spinning {
		return
	}
	w.spinning = false
	if s.spinners.Add(-1) == 0 && !s.cfg.NoBackground {
		s.appPollAt.Store(0)
		signal(s.bgKick)
	}
}

// background is the background poller: it polls while no application
// goroutine does, spins Config.Spin after the last work, then sleeps on the
// link until frames arrive, the next timer / pull release is due, or Wake.
func (s *Stack) background() {
	defer close(s.bgDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	idleSince := s.clock()
	woke := false // back from a sleep on the link, nothing polled since
	for {
		select {
		case <-s.done:
			return
		default:
		}
		now := s.clock()
		if s.spinners.Load() > 0 || s.linkWaiter.Load() || now-ndp.Time(s.appPollAt.Load()) < appGrace {
			if !s.waitKick(timer) {
				return
			}
			idleSince, woke = s.clock(), false
			continue
		}
		s.mu.Lock()
		now = s.clock() // after the lock: a stale now would stamp sends in the past (early RTOs)
		did := s.pollLocked(now)
		s.unlock()
		if did {
			idleSince, woke = now, false
			continue
		}
		// A sleep that ended with nothing to poll was a Wake (an API
		// call's new timer, afterCallUnlock) or its deadline: sleep again
		// at once, without the idle spin. Spinning there took the CPU of
		// the thread that woke it: in `ndpperf rpc --conn persistent` the
		// client's Write woke its stack's poller at a turn's start, the
		// kernel ran that thread on the client's CPU, and it spun the
		// adaptive window (up to MaxSpin, 1 ms) while the client stayed
		// inside its eventfd write and the echo goroutine it had just
		// started waited on the client's P: 1.9 ms to the turn's first
		// answer, and the client's RTO fired (TestWokenPollerSleepsAgain).
		if !woke && now-idleSince < ndp.Time(s.spin.Load()) {
			continue
		}
		if s.linkWaiter.CompareAndSwap(false, true) {
			s.sleepOnLink(100 * time.Millisecond)
			s.linkWaiter.Store(false)
			woke = true
		} else {
			// An application goroutine sleeps on the link and polls when
			// it wakes; check back after the grace period.
			if !s.waitKick(timer) {
				return
			}
		}
		idleSince = s.clock()
	}
}

// waitKick parks the background poller until a kick, the application grace period,
// or Close; it reports false on Close. timer is the poller's own, stopped and drained
// on return so the next Reset starts clean.
func (s *Stack) waitKick(timer *time.Timer) bool {
	timer.Reset(time.Duration(appGrace))
	select {
	case <-s.bgKick:
	case <-timer.C:
	case <-s.done:
		return false
	}
	if !timer.Stop() {
		select {
		case <-timer.C:
		default:
		}
	}
	return true
}

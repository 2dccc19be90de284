package daemon

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// RunConfig says how RunCores runs the core loops. The zero value is valid.
type RunConfig struct {
	// CPUs pins the i-th core's loop (its locked OS thread) to CPUs[i];
	// -1, or no entry, leaves it to the scheduler. A CPU that cannot be set
	// is logged and the loop runs unpinned.
	CPUs []int
	// StallTimeout: a core whose loop has not started an iteration for this
	// long (Core.Stalled) is taken as stuck. A loop starts one at least every
	// Config.MaxSleep (10ms) while it works or waits. Default 2s; negative =
	// no watchdog.
	StallTimeout time.Duration
	// Logger; nil = no logs.
	Logger *zap.Logger
}

// ErrQueueFailed: a queue's core loop returned an error, panicked, exited
// or stalled (a *QueueError says which and how).
var ErrQueueFailed = errors.New("ndpd: queue core loop failed")

// QueueError is the failure of one queue's core loop.
type QueueError struct {
	Queue int
	Err   error
}

func (e *QueueError) Error() string        { return fmt.Sprintf("ndpd: queue %d: %v", e.Queue, e.Err) }
func (e *QueueError) Unwrap() error        { return e.Err }
func (e *QueueError) Is(target error) bool { return target == ErrQueueFailed }

// ErrStalled: a core loop did not iterate for RunConfig.StallTimeout.
var ErrStalled = errors.New("core loop stalled")

// RunCores runs every core's loop (Core.Run), each on its own locked OS
// thread (pinned by cfg.CPUs), and supervises them. It returns nil once
// every loop returned nil (each drained: call Drain on all of them), or,
// as soon as one fails (an error, a panic, a goroutine exit, or a stall seen
// by the watchdog), a *QueueError: the queues share fate. Before it returns
// the error it stops every core (Core.Stop: each healthy loop reclaims its
// applications, whose control connections close) and waits up to
// StallTimeout for the healthy loops to finish; a stuck loop cannot be
// ended, so the caller must close the Server (every application, the stuck
// queue's too, then sees ErrDaemonGone) and exit.
//
// Why shared fate: every application is attached to every queue (a
// connection lives on the queue its frames arrive on), so a queue that
// dies alone would leave every application silently unable to reach the
// peers hashed to it while the daemon looks alive.
func RunCores(cores []*Core, cfg RunConfig) error {
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	type result struct {
		i   int
		err error
	}
	done := make(chan result, len(cores))
	for i, c := range cores {
		cpu := -1
		if i < len(cfg.CPUs) {
			cpu = cfg.CPUs[i]
		}
		go func() {
			returned := false
			defer func() {
				if returned {
					return
				}
				// Run did not return: a panic (recovered here, so the other
				// queues' loops and the process see it as an error), or
				// runtime.Goexit.
				err := errors.New("core loop goroutine exited")
				if r := recover(); r != nil {
					err = fmt.Errorf("core loop panicked: %v", r)
					log.Error("core loop panicked", zap.Int("queue", c.Queue()), zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
				}
				done <- result{i, err}
			}()
			runtime.LockOSThread()
			if cpu >= 0 {
				var set unix.CPUSet
				set.Set(cpu)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					log.Warn("pin core loop", zap.Int("queue", c.Queue()), zap.Int("cpu", cpu), zap.Error(err))
				}
			}
			err := c.Run()
			returned = true
			done <- result{i, err}
		}()
	}
	var tick <-chan time.Time
	if cfg.StallTimeout > 0 {
		t := time.NewTicker(max(cfg.StallTimeout/4, time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	finished := make([]bool, len(cores))
	left := len(cores)
	var failed *QueueError
	for left > 0 && failed == nil {
		select {
		case r := <-done:
			finished[r.i] = true
			left--
			if r.err != nil {
				failed = &QueueError{Queue: cores[r.i].Queue(), Err: r.err}
			}
		case now := <-tick:
			for i, c := range cores {
				if !finished[i] && c.Stalled(now, cfg.StallTimeout) {
					failed = &QueueError{Queue: c.Queue(), Err: fmt.Errorf("%w: no iteration for %v", ErrStalled, cfg.StallTimeout)}
					break
				}
			}
		}
	}
	if failed == nil {
		return nil
	}
	log.Error("queue failed: stopping every queue", zap.Int("queue", failed.Queue), zap.Error(failed.Err))
	for _, c := range cores {
		c.Stop()
	}
	bound := time.NewTimer(max(cfg.StallTimeout, time.Second))
	defer bound.Stop()
	for left > 0 {
		select {
		case r := <-done:
			finished[r.i] = true
			left--
		case <-bound.C:
			return failed // a stuck loop: it never returns
		}
	}
	return failed
}

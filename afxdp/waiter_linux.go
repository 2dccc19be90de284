package afxdp

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/eventfd"
	"golang.org/x/sys/unix"
)

// waiter is the Port's sleep/wake machinery for adaptive mode: an eventfd
// polled together with the sockets, and a count of goroutines inside Wait
// so Close can wake them and wait for them to leave before it unmaps the
// rings (Dekker handshake: Wait increments waiters then checks closed; Close
// sets closed then checks waiters; both sequentially consistent).
type waiter struct {
	fd      int
	closed  atomic.Bool
	waiters atomic.Int32
}

func newWaiter() (*waiter, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, &SyscallError{Op: "eventfd", Queue: -1, Err: err}
	}
	return &waiter{fd: fd}, nil
}

func (w *waiter) enter() bool {
	w.waiters.Add(1)
	if w.closed.Load() {
		w.waiters.Add(-1)
		return false
	}
	return true
}

func (w *waiter) exit() { w.waiters.Add(-1) }

func (w *waiter) wake() error {
	if w.closed.Load() {
		return ErrClosed
	}
	if err := eventfd.Signal(w.fd); err != nil {
		return &SyscallError{Op: "eventfd write", Queue: -1, Err: err}
	}
	return nil
}

// poll waits on fds (the last one is the eventfd).
func (w *waiter) poll(fds []unix.PollFd, timeout time.Duration, iface string, queue int) (bool, error) {
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	_, err := unix.Poll(fds, ms)
	if err != nil {
		if errors.Is(err, unix.EINTR) {
			return false, nil
		}
		return false, &SyscallError{Op: "poll", Iface: iface, Queue: queue, Err: err}
	}
	last := len(fds) - 1
	if fds[last].Revents&unix.POLLIN != 0 {
		if w.closed.Load() {
			return false, ErrClosed
		}
		_ = eventfd.Drain(w.fd) // empty if another waiter drained it
	}
	for _, f := range fds[:last] {
		if f.Revents&unix.POLLIN != 0 {
			return true, nil
		}
	}
	return false, nil
}

// shutdown marks the port closed, wakes every Wait and waits until none is
// left inside one.
func (w *waiter) shutdown() {
	w.closed.Store(true)
	_ = eventfd.Signal(w.fd)
	for w.waiters.Load() > 0 {
		runtime.Gosched()
	}
}

func (w *waiter) close() { unix.Close(w.fd) }

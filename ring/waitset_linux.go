package ring

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/eventfd"
	"golang.org/x/sys/unix"
)

// WaitSet runs the sleep side of the wakeup protocol (wake_linux.go) over
// several Waiters at once, plus any extra descriptors the caller also wants
// to sleep on (an AF_XDP socket, a request doorbell): the daemon's core
// serves many regions and must sleep until any of them, or its NIC, has work.
//
//	S1  store flag = 1 in every member Waiter's region
//	S2  pending(): the caller loads every input ring afresh; if anything is
//	    there, S4 and return without a syscall
//	S3  one poll(2) over every member eventfd and extra descriptor
//	S4  store flag = 0 everywhere; drain the member eventfds that fired
//
// For each region the pairing with that application's Notifier is exactly
// the single-Waiter one, so no wakeup is lost. Extra descriptors are only
// polled for POLLIN, never read: the caller consumes them.
//
// One goroutine owns a WaitSet; membership changes only between Waits.
type WaitSet struct {
	waiters []*Waiter
	extra   []int
	pfds    []unix.PollFd
}

// Add makes w a member. A Waiter belongs to at most one WaitSet and is not
// used with Wait directly while it is a member.
func (s *WaitSet) Add(w *Waiter) { s.waiters = append(s.waiters, w) }

// Remove drops w (e.g. before closing its region).
func (s *WaitSet) Remove(w *Waiter) {
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			return
		}
	}
}

// AddFD adds a descriptor to poll for POLLIN alongside the members.
func (s *WaitSet) AddFD(fd int) { s.extra = append(s.extra, fd) }

// Len returns the number of member Waiters.
func (s *WaitSet) Len() int { return len(s.waiters) }

// Wait sleeps until a member's peer notifies, an extra descriptor is
// readable, a member is interrupted, or timeout passes (< 0: no limit),
// unless pending reports work after the flags are raised. A member that was
// shut down (Region.Shutdown) makes Wait return net.ErrClosed at once so the
// caller can drop it. A wakeup does not promise work: callers loop.
func (s *WaitSet) Wait(pending func() bool, timeout time.Duration) error {
	for _, w := range s.waiters {
		if w.closed.Load() {
			return net.ErrClosed
		}
	}
	for _, w := range s.waiters {
		atomic.StoreUint32(w.flag, 1) // S1
	}
	defer func() {
		for _, w := range s.waiters {
			atomic.StoreUint32(w.flag, 0) // S4
		}
	}()
	if pending() { // S2
		return nil
	}
	s.pfds = s.pfds[:0]
	for _, w := range s.waiters {
		s.pfds = append(s.pfds, unix.PollFd{Fd: int32(w.efd), Events: unix.POLLIN})
	}
	for _, fd := range s.extra {
		s.pfds = append(s.pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	for { // S3
		_, err := unix.Poll(s.pfds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	for i, w := range s.waiters {
		if s.pfds[i].Revents&unix.POLLIN != 0 {
			eventfd.Drain(w.efd)
		}
		if w.closed.Load() {
			return net.ErrClosed
		}
	}
	return nil
}

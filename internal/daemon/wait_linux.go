package daemon

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ndpstack/ndpstack/internal/eventfd"
	"github.com/ndpstack/ndpstack/ring"
)

// Sleeping on many regions at once
//
// ring.Waiter implements the sleep side of the wakeup protocol for one
// region. The core serves many, so it runs the same protocol over all of
// them (ring/wake_linux.go has the lost-wakeup argument):
//
//	S1  store daemonSleeping = 1 in every region (sleepFlag.set)
//	S2  load every input ring afresh (Consumer.Pending, Producer.HasSpace)
//	    and the request queue; if anything is there: S4 and return
//	S3  ppoll on the request doorbell, every region's WakeDaemon eventfd and
//	    the transport's descriptor, at most until the transport's next timer
//	S4  store daemonSleeping = 0 everywhere; read the eventfds that fired
//
// An application's Notifier runs W1 (publish) then W2 (load our flag), so
// for each region the pairing is exactly ring's single-region one.
type multiWaiter struct {
	fds []unix.PollFd
}

// pending is S2: is there anything the loop would act on?
func (c *Core) pending() bool {
	if len(c.reqs) > 0 {
		return true
	}
	for _, s := range c.sessions {
		if s.end.Cmd.Pending() || s.end.Releases.Pending() {
			return true
		}
		if len(s.backlog) > 0 && s.end.Events.HasSpace() {
			return true
		}
		for _, slot := range s.acceptFree {
			if len(s.acceptQ) == 0 {
				break
			}
			if free, err := s.end.Sockets[slot].RX.Free(); err != nil || free == int(s.end.Sockets[slot].RX.Spec().Slots) {
				return true
			}
		}
		for slot := range s.socks {
			so := &s.socks[slot]
			if so.state == sockFree {
				continue
			}
			if so.state != sockDialing && (!so.blocked || so.state != sockBound) && s.end.Sockets[slot].TX.Pending() {
				return true
			}
			// A readable socket is work only if a delivery could happen: room
			// on its RX ring, frames in the pool, the app under its lent cap
			// (otherwise a Release from an app wakes us).
			// (Exactly pollRX's conditions: a slot whose stream ended stays
			// readable after TEClosed but has nothing more to deliver.)
			canDeliver := so.readable && so.state == sockBound && !so.ended &&
				s.lent < c.cfg.MaxLentPerApp && c.pool.Stats().DaemonFree > 0
			if (canDeliver || so.endDue || so.state == sockFreeing) && s.end.Sockets[slot].RX.HasSpace() {
				return true
			}
		}
	}
	return false
}

// sleep blocks until an application or a request rings, the transport has
// input, or its next timer (bounded by MaxSleep) is due.
//
// It reports whether the sleep ended for input (an application, a request
// or the transport; also when input was there before it could start)
// rather than at its timeout.
func (c *Core) sleep() (input bool) {
	timeout := c.cfg.MaxSleep
	if t := c.tr.PollTimeout(); t >= 0 && t < timeout {
		timeout = t
	}
	if c.draining {
		if left := time.Until(c.drainUntil); left < timeout {
			timeout = max(left, 0)
		}
	}
	for _, s := range c.sessions {
		s.sleep.set(1) // S1
	}
	defer func() {
		for _, s := range c.sessions {
			s.sleep.set(0) // S4
		}
	}()
	if timeout <= 0 {
		return false
	}
	if c.pending() { // S2
		return true
	}
	w := &c.waiter
	w.fds = append(w.fds[:0], unix.PollFd{Fd: int32(c.doorbell), Events: unix.POLLIN})
	if fd := c.tr.WaitFD(); fd >= 0 {
		w.fds = append(w.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	for _, s := range c.sessions {
		w.fds = append(w.fds, unix.PollFd{Fd: int32(s.wakeFD), Events: unix.POLLIN})
	}
	ts := unix.NsecToTimespec(int64(timeout))
	n, err := unix.Ppoll(w.fds, &ts, nil)
	if err != nil && !errors.Is(err, unix.EINTR) {
		c.log.Sugar().Warnf("ppoll: %v", err)
	}
	for i, p := range w.fds {
		if p.Revents&unix.POLLIN != 0 && (i == 0 || p.Fd != int32(c.tr.WaitFD())) {
			eventfd.Drain(int(p.Fd))
		}
	}
	return n > 0
}

func newDoorbell() (int, error) {
	return unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
}

func ringDoorbell(fd int) {
	eventfd.Signal(fd)
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// dupAttachment duplicates every descriptor of a (close-on-exec).
func dupAttachment(a ring.Attachment) (ring.Attachment, error) {
	out := ring.Attachment{Region: -1, WakeDaemon: -1, WakeApp: -1, Buffer: -1}
	for _, p := range []struct{ src, dst *int }{{&a.Region, &out.Region}, {&a.WakeDaemon, &out.WakeDaemon}, {&a.WakeApp, &out.WakeApp}, {&a.Buffer, &out.Buffer}} {
		fd, err := unix.FcntlInt(uintptr(*p.src), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			out.Close()
			return ring.Attachment{Region: -1, WakeDaemon: -1, WakeApp: -1, Buffer: -1}, err
		}
		*p.dst = fd
	}
	return out, nil
}

// yieldCPU gives the CPU to another runnable thread, if any (sched_yield).
func yieldCPU() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

package ring

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/eventfd"
	"golang.org/x/sys/unix"
)

// Wakeups
//
// Each side of a region has a sleep flag in the header (daemonSleeping,
// appSleeping; each on its own line, written only by its side) and an
// eventfd the other side writes to wake it. A side that is busy (spinning
// on its rings) never clears or sets anything and its peer pays one atomic
// load per batch and no syscall; a side that runs out of work sleeps:
//
//	sleeper (Waiter.Wait)                  waker (Notifier.Notify, after Produce/Release)
//	S1  store flag = 1                     W1  store producer (or consumer) index
//	S2  load peer indices (pending())      W2  load flag
//	    if work: store flag = 0, return        if flag == 1: write(eventfd, 1)
//	S3  poll(eventfd); read(eventfd)
//	S4  store flag = 0
//
// Lost-wakeup freedom: S1/S2 and W1/W2 are each a store followed by a load
// of the other side's word, all sequentially consistent (Go's sync/atomic;
// a shared mapping is ordinary coherent memory). In the single total order
// of these four operations, either S2 comes after W1, so the sleeper sees
// the new index and does not sleep; or S2 comes before W1, hence S1 before
// W2, so the waker sees flag == 1 and writes the eventfd, whose counter
// stays set until S3 reads it even if the write lands before the poll.
// Release/acquire alone would not do: it allows both loads to miss the other
// store (the classic store-buffer reordering), which is exactly a lost wakeup.
//
// A spurious wakeup (flag seen as 1 just before S4) costs one extra eventfd
// write and one extra loop of the sleeper; never a missed one.

// Waiter is the sleeping side of one direction: it owns its side's sleep flag
// and reads the eventfd the peer writes. One goroutine owns a Waiter;
// Interrupt and Close may be called from any goroutine.
type Waiter struct {
	flag   *uint32 // shared: this side's sleep flag
	efd    int
	closed atomic.Bool
}

// Notifier is the waking side of one direction: it reads the peer's sleep
// flag and writes the peer's eventfd. One goroutine owns a Notifier.
type Notifier struct {
	flag    *uint32 // shared: the peer's sleep flag
	efd     int
	Wakeups atomic.Uint64 // eventfd writes made (syscalls paid)
}

// Wait sleeps until the peer notifies, the timeout passes (timeout < 0 waits
// forever), or Interrupt/Close is called, unless pending reports work after
// the sleep flag is raised, in which case it returns at once without a
// syscall. pending must load the peer's indices afresh (Consumer.Pending,
// Producer.HasSpace), never cached positions. Returns net.ErrClosed after
// Close. A wakeup does not promise work: callers loop.
func (w *Waiter) Wait(pending func() bool, timeout time.Duration) error {
	if w.closed.Load() {
		return net.ErrClosed
	}
	atomic.StoreUint32(w.flag, 1) // S1
	if pending() {                // S2
		atomic.StoreUint32(w.flag, 0)
		return nil
	}
	ms := -1
	if timeout >= 0 {
		ms = int((timeout + time.Millisecond - 1) / time.Millisecond)
	}
	err := w.sleep(ms)            // S3
	atomic.StoreUint32(w.flag, 0) // S4
	if w.closed.Load() {
		return net.ErrClosed
	}
	return err
}

func (w *Waiter) sleep(ms int) error {
	fds := []unix.PollFd{{Fd: int32(w.efd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	// Drain the counter (non-blocking fd: empty on timeout is fine).
	return eventfd.Drain(w.efd)
}

// Interrupt wakes a Wait in progress (or makes the next one return at once),
// e.g. when the daemon learns on the control socket that its peer died.
func (w *Waiter) Interrupt() error {
	return eventfd.Signal(w.efd)
}

// Notify wakes the peer if it is asleep: one atomic load of its flag (W2),
// and a write to its eventfd only when the flag is set. Call it after a
// batch of Produce or Release calls (W1). Returns whether a syscall was made.
func (n *Notifier) Notify() (bool, error) {
	if atomic.LoadUint32(n.flag) == 0 {
		return false, nil
	}
	n.Wakeups.Add(1)
	return true, eventfd.Signal(n.efd)
}

// NotifyMask is Notify for a peer whose sleep word carries more than one
// flag: it writes the eventfd only when the word has a bit of mask set (the
// waker decides which of the peer's reasons to wait this batch answers).
// The ordering argument is Notify's, for each bit.
func (n *Notifier) NotifyMask(mask uint32) (bool, error) {
	if atomic.LoadUint32(n.flag)&mask == 0 {
		return false, nil
	}
	n.Wakeups.Add(1)
	return true, eventfd.Signal(n.efd)
}

// newEventfd makes a non-blocking, close-on-exec eventfd.
func newEventfd() (int, error) {
	return unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
}

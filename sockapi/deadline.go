package sockapi

import (
	"sync"
	"time"
)

// deadline is a settable deadline for blocking calls, after net.Pipe's: wait
// returns a channel that is closed once the deadline has passed. Setting a
// deadline in the past closes it at once (unblocking current waiters);
// setting a later one or none reopens it for future calls. Its zero value
// is no deadline; the channel is made by the first wait (a call that
// blocks must hold the channel a later set closes), so a zero deadline
// costs nothing until used.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{} // nil until the first wait or set (or after a reopen)
}

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait for its close to finish
	}
	d.timer = nil
	closed := isClosedChan(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = nil
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed || d.cancel == nil {
			d.cancel = make(chan struct{})
		}
		ch := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(ch) })
		return
	}
	if d.cancel == nil {
		d.cancel = make(chan struct{})
	}
	if !closed {
		close(d.cancel)
	}
}

// clear is set(time.Time{}) for a deadline that nothing can set
// meanwhile (a Conn going back to the free list: putCallConn). Without a
// timer and with its channel open, the common case of a connection no
// deadline was set on, it has nothing to undo and takes no lock.
func (d *deadline) clear() {
	if d.timer == nil && !isClosedChan(d.cancel) {
		return
	}
	d.set(time.Time{})
}

// wait returns the channel blocking calls select on, closed once the
// deadline passes.
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		d.cancel = make(chan struct{})
	}
	return d.cancel
}

func isClosedChan(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

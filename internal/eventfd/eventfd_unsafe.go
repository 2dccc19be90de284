//go:build linux

package eventfd

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Signal adds 1 to the counter of eventfd fd, waking its pollers. A
// counter at its maximum (EAGAIN on a non-blocking eventfd) is already
// signalled and counts as success; EINTR is retried.
func Signal(fd int) error {
	one := uint64(1)
	return rw(unix.SYS_WRITE, fd, &one)
}

// Drain resets the counter of non-blocking eventfd fd to zero. A counter
// already zero (EAGAIN: another waiter drained it) counts as success;
// EINTR is retried.
func Drain(fd int) error {
	var v uint64
	return rw(unix.SYS_READ, fd, &v)
}

// rw is read(2) or write(2) (trap) of the 8-byte counter value v on fd,
// EINTR retried, EAGAIN taken as success.
func rw(trap uintptr, fd int, v *uint64) error {
	for {
		_, _, e := unix.Syscall(trap, uintptr(fd), uintptr(unsafe.Pointer(v)), 8)
		switch e {
		case 0, unix.EAGAIN:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

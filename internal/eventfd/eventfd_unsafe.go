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
	for {
		_, _, e := unix.Syscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&one)), 8)
		switch e {
		case 0, unix.EAGAIN:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

// Drain resets the counter of non-blocking eventfd fd to zero. A counter
// already zero (EAGAIN: another waiter drained it) counts as success;
// EINTR is retried.
func Drain(fd int) error {
	var v uint64
	for {
		_, _, e := unix.Syscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&v)), 8)
		switch e {
		case 0, unix.EAGAIN:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}

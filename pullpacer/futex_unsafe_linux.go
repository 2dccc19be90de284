package pullpacer

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// futex(2) operations (linux/futex.h); x/sys/unix does not export them.
const (
	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

// futexWait sleeps while *addr == val, until woken, interrupted, or timeout (> 0)
// passes. It goes through unix.Syscall6, so the Go scheduler knows the thread is
// blocked and can hand its P to another thread.
func futexWait(addr *uint32, val uint32, timeout time.Duration) {
	var ts unix.Timespec
	var tsp unsafe.Pointer
	if timeout > 0 {
		ts = unix.NsecToTimespec(int64(timeout))
		tsp = unsafe.Pointer(&ts)
	}
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitPrivate,
		uintptr(val), uintptr(tsp), 0, 0)
}

// futexWake wakes one thread sleeping on addr.
func futexWake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakePrivate, 1, 0, 0, 0)
}

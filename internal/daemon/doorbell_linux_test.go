package daemon

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDoorbellNotRungAfterStop: the core's doorbell is rung from other
// goroutines (control requests, the transport's resolution workers: a
// resolution can finish after the core stopped, before the stack closes).
// Once Run has closed the doorbell, its descriptor number may belong to
// another file; ringing it must not write there.
func TestDoorbellNotRungAfterStop(t *testing.T) {
	h := startHarness(t, smallConfig(), ServerConfig{})
	db := h.core.doorbell
	h.stop()
	// Descriptors are allocated lowest first: take them until the
	// doorbell's number comes back.
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	reused := -1
	for i := 0; i <= db && reused < 0; i++ {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		if fd == db {
			reused = fd
		}
	}
	if reused < 0 {
		t.Fatalf("descriptor %d did not come back (got %v)", db, fds)
	}
	h.tr.mu.Lock()
	wake := h.tr.wake
	h.tr.mu.Unlock()
	wake() // a resolution finishing late
	for i := 0; i < 64; i++ {
		if _, err := h.core.Status(); !errors.Is(err, ErrStopped) {
			t.Fatalf("Status after stop: %v", err)
		}
	}
	var b [8]byte
	if n, err := unix.Read(reused, b[:]); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("the file that took the closed doorbell's number was written to: read %d, %v", n, err)
	}
}

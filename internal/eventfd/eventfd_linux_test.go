package eventfd

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestSignalDrain(t *testing.T) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	readable := func() bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if readable() {
		t.Fatal("new eventfd readable")
	}
	if err := Drain(fd); err != nil {
		t.Fatalf("drain of a zero counter: %v", err)
	}
	for range 3 {
		if err := Signal(fd); err != nil {
			t.Fatal(err)
		}
	}
	if !readable() {
		t.Fatal("signalled eventfd not readable")
	}
	if err := Drain(fd); err != nil {
		t.Fatal(err)
	}
	if readable() {
		t.Fatal("drained eventfd still readable")
	}
	if err := Signal(-1); err != unix.EBADF {
		t.Fatalf("signal of a bad fd: %v, want EBADF", err)
	}
}

// Signal and Drain allocate nothing, -race included.
func TestNoAllocs(t *testing.T) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if n := testing.AllocsPerRun(1000, func() {
		Signal(fd)
		Drain(fd)
	}); n != 0 {
		t.Fatalf("%v allocations per Signal+Drain", n)
	}
}

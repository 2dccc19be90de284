package daemon

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// daemonSleepingOff is the byte offset of the daemon's sleep flag in a
// region (ring/layout.go, layout version 1: "128 4 daemonSleeping"). The
// test TestSleepFlagOffset checks it against ring's own Notifier.
const daemonSleepingOff = 128

// sleepFlag is a second, private mapping of the first page of a region,
// through which the core raises the daemon's sleep flag of every region at
// once before it sleeps on all their eventfds together (ring.Waiter sleeps
// on one region only). Only the core goroutine writes it.
type sleepFlag struct {
	page []byte
	p    *uint32
}

func mapSleepFlag(regionFD int) (sleepFlag, error) { return mapSleepWord(regionFD, daemonSleepingOff) }

// appSleepingOff is the application's sleep word (ring/layout.go: "256 4
// appSleeping"); the client keeps two counts in it (proto.go,
// appSleepersMask and appFrameWaitMask).
const appSleepingOff = 256

func mapSleepWord(regionFD int, off int) (sleepFlag, error) {
	page, err := unix.Mmap(regionFD, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return sleepFlag{}, fmt.Errorf("ndpd: map region sleep word: %w", err)
	}
	return sleepFlag{page: page, p: (*uint32)(unsafe.Pointer(&page[off]))}, nil
}

// set stores the flag with a sequentially consistent atomic store, the S1
// and S4 steps of ring's wakeup protocol (ring/wake_linux.go).
func (f sleepFlag) set(v uint32) {
	if f.p != nil {
		atomic.StoreUint32(f.p, v)
	}
}

func (f *sleepFlag) unmap() {
	if f.page != nil {
		unix.Munmap(f.page)
		f.page, f.p = nil, nil
	}
}

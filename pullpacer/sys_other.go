//go:build !linux

package pullpacer

import "time"

// Elsewhere the pacing thread parks on a channel and cannot be pinned.
const futexSupported = false

const maxCPU = 0

func gettid() int { return 0 }

func pinToCPU(cpu int) error { return errPinUnsupported }

func setThreadNice(nice int) error { return errPinUnsupported }

func futexWait(addr *uint32, val uint32, timeout time.Duration) {}

func futexWake(addr *uint32) {}

// ThreadCPUTime is only available on Linux.
func (p *Pacer) ThreadCPUTime() (time.Duration, error) { return 0, errPinUnsupported }

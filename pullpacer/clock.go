package pullpacer

import (
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

var epoch = time.Now()

// MonotonicNow is the default clock of the stacks that poll a PullQueue:
// nanoseconds on Go's monotonic clock since this package was initialized. It
// costs one vDSO clock_gettime (~25ns here).
func MonotonicNow() ndp.Time { return ndp.Time(time.Since(epoch)) }

//go:build !race

package ring

// Without the race detector the cross-process stream carries the full ten
// million descriptors.
const (
	streamCount    = 10_000_000
	killAfterCount = 200_000
)

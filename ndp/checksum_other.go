//go:build !amd64 || purego

package ndp

// hasAVX2 is false: there is no wide path to use (TestSumBytesLong sets
// it on every build to pick the path it checks).
var hasAVX2 = false

// sumWords32 has no wide implementation here: sumBytes sums all of b.
func sumWords32([]byte) (uint64, int) { return 0, 0 }

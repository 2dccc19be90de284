//go:build race

package ring

// Under -race every atomic and every byte copy is instrumented (about 20x
// slower), so the cross-process stream carries one million descriptors; the
// full ten million run without -race (count_norace_test.go).
const (
	streamCount    = 1_000_000
	killAfterCount = 50_000
)

//go:build race

package engine

// raceEnabled: under the race detector (5-20x slower) some e2e tests use
// smaller counts; see xdp_linux_test.go.
const raceEnabled = true

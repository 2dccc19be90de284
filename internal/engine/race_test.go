//go:build race

package engine

// raceEnabled: built with -race, whose runtime allocates on its own now
// and then (shadow state for goroutines and channels).
const raceEnabled = true

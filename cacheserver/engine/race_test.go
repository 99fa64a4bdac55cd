//go:build race

package engine

// raceEnabled scales the heavier tests down under the race detector, which
// slows them about tenfold.
const raceEnabled = true

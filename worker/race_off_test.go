//go:build !race

package worker

// raceEnabled: see race_on_test.go.
const raceEnabled = false

//go:build race

package main

// raceEnabled: this test binary was built with -race, so the CLI processes the tests
// start (this binary, re-executed) start several times slower than a real `jobs`.
const raceEnabled = true

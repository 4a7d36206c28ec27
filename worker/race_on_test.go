//go:build race

package worker

// raceEnabled: this test binary was built with -race, which slows the worker several
// times over: bounds on how late it may be are wider.
const raceEnabled = true

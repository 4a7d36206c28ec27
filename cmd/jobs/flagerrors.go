package main

import (
	"fmt"
	"regexp"

	"github.com/urfave/cli/v2"
)

// The flag package's parse errors name a flag as Go's flag package spells it ("invalid
// value "5x" for flag -delay: parse error"); flagMessage says the same in the words of
// the command line.
var (
	badValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([A-Za-z0-9-]+): `)
	noFlag   = regexp.MustCompile(`^flag provided but not defined: -([A-Za-z0-9-]+)$`)
	noValue  = regexp.MustCompile(`^flag needs an argument: -([A-Za-z0-9-]+)$`)
)

// flagMessage turns a flag parse error of c's command into one line naming the flag as
// typed and what it wants; other messages are returned unchanged.
func flagMessage(c *cli.Context, msg string) string {
	if m := noFlag.FindStringSubmatch(msg); m != nil {
		return "unknown flag " + flagWord(m[1]) + "; see --help"
	}
	if m := noValue.FindStringSubmatch(msg); m != nil {
		return flagWord(m[1]) + " needs a value"
	}
	m := badValue.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	value, name := m[1], m[2]
	if value == "--" { // hoistFlags ends the flags with "--": the value was missing
		return flagWord(name) + " needs a value"
	}
	want := "not a valid value"
	switch flagOf(c, name).(type) {
	case *cli.DurationFlag:
		want = "want a duration such as 30s, 5m or 1h30m"
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		want = "want a whole number"
	case *cli.Float64Flag:
		want = "want a number"
	case *cli.BoolFlag:
		want = "want true or false"
	}
	return fmt.Sprintf("%s %q: %s", flagWord(name), value, want)
}

// flagWord is a flag's name as typed: -h, --delay.
func flagWord(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagOf finds the flag called name among those of c's command, the commands above it
// and the app; nil if none.
func flagOf(c *cli.Context, name string) cli.Flag {
	var sets [][]cli.Flag
	for _, ctx := range c.Lineage() {
		if ctx.Command != nil {
			sets = append(sets, ctx.Command.Flags)
		}
	}
	if c.App != nil {
		sets = append(sets, c.App.Flags)
	}
	for _, set := range sets {
		for _, f := range set {
			for _, n := range f.Names() {
				if n == name {
					return f
				}
			}
		}
	}
	return nil
}

// jobConflicts are the settings of one job that exclude or need each other, by flag name
// (a --file line's fields are the same names with '_'). The queue package refuses them
// too, in the words of its Go API (Delay, Unique(ttl)); checked here first, they are
// named as the user typed them.
var jobConflicts = []struct {
	a, b  string
	needs bool   // a needs b; else they exclude each other
	why   string // for an exclusion
}{
	{a: "delay", b: "at", why: "choose one"},
	{a: "after", b: "delay", why: "a job with dependencies runs when they end"},
	{a: "after", b: "at", why: "a job with dependencies runs when they end"},
	{a: "ignore-dependency-failure", b: "after", needs: true},
	{a: "unique-key", b: "unique-for", needs: true},
	{a: "unique-until-expiry", b: "unique-for", needs: true},
}

// jobConflict returns the first of jobConflicts that the settings given (has) run into,
// naming each setting by word.
func jobConflict(has func(name string) bool, word func(name string) string) error {
	for _, c := range jobConflicts {
		switch {
		case c.needs && has(c.a) && !has(c.b):
			return usagef("%s needs %s", word(c.a), word(c.b))
		case !c.needs && has(c.a) && has(c.b):
			return usagef("%s and %s exclude each other: %s", word(c.a), word(c.b), c.why)
		}
	}
	return nil
}

// given reports whether flag name was given on c's command: set, and true for a boolean
// flag (--exclusive=false gives nothing).
func given(c *cli.Context, name string) bool {
	if _, ok := flagOf(c, name).(*cli.BoolFlag); ok {
		return c.Bool(name)
	}
	return c.IsSet(name)
}

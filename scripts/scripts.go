// Package scripts holds the Lua scripts that move jobs between states, one file per
// transition, embedded at build time. Only package queue runs them: every change of a
// job's state is one of these scripts, executed atomically by Redis, so no crash between
// two commands can lose or duplicate a job.
//
// Each file opens with a contract header: its KEYS and ARGV (with units), what it returns,
// which clock it reads, and the invariant it keeps. The functions of scripts/lib (the
// lib) that a script calls are prepended to it.
//
// Scripts that settle or renew claimed jobs (claim, heartbeat, ack, fail, handback, reap)
// make a removal their first change: Redis at maxmemory with noeviction refuses a script's
// deny-oom command (HSET, ZADD, RPUSH) only until the script has changed something, so
// these keep working on a full Redis and the jobs already queued can drain it. Each
// transition also appends its event to the queue's events stream (XADD, deny-oom too)
// after that first write, so the events never make such a script fail on a full Redis.
package scripts

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua lib/*.lua
var files embed.FS

// libFiles are the library's files (scripts/lib), in the order they are joined: a
// function is defined before the functions that call it. Joined, they are "the lib".
var libFiles = []string{"lib/base.lua", "lib/keys.lua", "lib/workflow.lua", "lib/claim.lua"}

// readLib returns the lib: libFiles joined.
func readLib() (string, error) {
	var b strings.Builder
	for _, name := range libFiles {
		text, err := files.ReadFile(name)
		if err != nil {
			return "", err
		}
		b.Write(text)
	}
	return b.String(), nil
}

// The scripts, in lifecycle order. They are package-level values (the one documented
// exception to "no package-level state"): a redis.Script is immutable apart from its
// cached digest, and sharing it lets EVALSHA hit the server's script cache.
var (
	Enqueue   = load("enqueue.lua")
	Promote   = load("promote.lua")
	Claim     = load("claim.lua")
	Heartbeat = load("heartbeat.lua")
	Ack       = load("ack.lua")
	AckClaim  = load("ackclaim.lua")
	Fail      = load("fail.lua")
	HandBack  = load("handback.lua")
	Reap      = load("reap.lua")
	Retry     = load("retry.lua")
	Cancel    = load("cancel.lua")
	Purge     = load("purge.lua")
	Delete    = load("delete.lua")
	// Workflows: a dependency's side of an edge, a resolution delivered to another
	// slot, and batches.
	Link    = load("link.lua")
	Resolve = load("resolve.lua")
	Batch   = load("batch.lua")
	// Metrics adds a worker's statistics to the metrics history; it moves no job.
	Metrics = load("metrics.lua")
	Pause   = load("pause.lua")
	// Limit sets or removes a queue's limits; Limits reads them (and changes nothing).
	Limit  = load("limit.lua")
	Limits = load("limits.lua")
	// Depths counts a queue's jobs in each state (and changes nothing).
	Depths = load("depths.lua")
	// Audit appends an operator's action to the audit log; it moves no job.
	Audit = load("audit.lua")

	// The registry of live processes (`jobs workers`), outside any queue.
	Register   = load("register.lua")
	Deregister = load("deregister.lua")
	Order      = load("order.lua")
)

// All lists every script, for loading them ahead of pipelined EVALSHA calls.
var All = []*redis.Script{Enqueue, Promote, Claim, Heartbeat, Ack, AckClaim, Fail, HandBack, Reap, Retry, Cancel, Purge,
	Delete, Link, Resolve, Batch, Metrics, Pause, Limit, Limits, Depths, Audit, Register, Deregister, Order}

// Source returns the full text Redis runs for the named file: the lib functions it
// calls (directly or through one another), then the file itself. Redis runs a script's
// whole text on every call, so each function of the lib it carried would be created and
// thrown away each time, used or not. A file with a libMarker line gets them there
// instead, so that a path above it that needs none of them returns before they are made.
func Source(name string) (string, error) {
	lib, err := readLib()
	if err != nil {
		return "", err
	}
	src, err := files.ReadFile(name)
	if err != nil {
		return "", err
	}
	funcs := libFor(lib, string(src))
	if before, after, ok := strings.Cut(string(src), "\n"+libMarker); ok {
		return before + "\n" + funcs + "\n" + after, nil
	}
	return funcs + "\n" + string(src), nil
}

// libMarker is the line of a script where Source puts the lib's functions it calls.
const libMarker = "-- (the lib's functions go here)\n"

// libFor returns what src needs of lib: lib's opening comment, then each of its
// "local function NAME" definitions that src calls or that such a definition calls, in
// lib's order, without the comment block above each: Redis keeps every script's text in
// its script cache, which counts against maxmemory (on a Redis filled to it, the
// comments of the functions limits added left too little room to enqueue again after a
// purge), and those comments are read in the lib, not in Redis.
func libFor(lib, src string) string {
	lines := strings.SplitAfter(lib, "\n")
	var starts []int // index of the first line (comments included) of each definition
	var defs []int   // index of each definition's own line
	var names []string
	for i, line := range lines {
		rest, ok := strings.CutPrefix(line, "local function ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, "(")
		start := i
		for start > 0 && strings.HasPrefix(lines[start-1], "--") {
			start--
		}
		starts, defs, names = append(starts, start), append(defs, i), append(names, strings.TrimSpace(name))
	}
	if len(starts) == 0 {
		return lib
	}
	text := make([]string, len(starts))
	for k := range starts {
		end := len(lines)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		text[k] = strings.Join(codeOnly(lines[defs[k]:end]), "")
	}
	need := reached(names, text, src)
	out := strings.Join(lines[:starts[0]], "")
	for k := range starts {
		if need[k] {
			out += text[k]
		}
	}
	return out
}

// reached reports which of lib's functions (names, text: their definitions) src needs:
// those it calls, through one another too.
func reached(names, text []string, src string) []bool {
	need := make([]bool, len(names))
	for changed, from := true, src; changed; {
		changed = false
		for k, name := range names {
			if !need[k] && calls(from, name) {
				need[k], changed = true, true
			}
		}
		var b strings.Builder
		for k := range names {
			if need[k] {
				b.WriteString(text[k])
			}
		}
		from = b.String()
	}
	return need
}

// codeOnly drops the comment lines (a line whose first non-blank characters are "--")
// of a definition's lines, for the same reason as the comment blocks above definitions:
// the workflows' functions, carried by every script that ends a job, explain themselves
// at length in the lib, and on a Redis filled to its maxmemory that text alone left too
// little room to enqueue after a purge. The lib has no long strings or block comments,
// so such a line is never inside a string.
func codeOnly(lines []string) []string {
	out := lines[:0:0]
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimLeft(l, " \t"), "--") {
			out = append(out, l)
		}
	}
	return out
}

// calls reports whether src calls the function name: name( not preceded by a letter,
// digit or underscore.
func calls(src, name string) bool {
	for i := 0; ; {
		j := strings.Index(src[i:], name+"(")
		if j < 0 {
			return false
		}
		j += i
		if j == 0 || !isIdent(src[j-1]) {
			return true
		}
		i = j + 1
	}
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func load(name string) *redis.Script {
	src, err := Source(name)
	if err != nil {
		panic("scripts: " + err.Error()) // embedded at build time: cannot happen
	}
	return redis.NewScript(src)
}

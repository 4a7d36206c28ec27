// Package scripts holds the Lua scripts that move jobs between states, one file per
// transition, embedded at build time. Only package queue runs them: every change of a
// job's state is one of these scripts, executed atomically by Redis, so no crash between
// two commands can lose or duplicate a job.
//
// Each file opens with a contract header: its KEYS and ARGV (with units), what it returns,
// which clock it reads, and the invariant it keeps. lib.lua is prepended to every script.
//
// Scripts that settle or renew claimed jobs (claim, heartbeat, ack, fail, handback, reap)
// make a removal their first change: Redis at maxmemory with noeviction refuses a script's
// deny-oom command (HSET, ZADD, RPUSH) only until the script has changed something, so
// these keep working on a full Redis and the jobs already queued can drain it.
package scripts

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// The scripts, in lifecycle order. They are package-level values (the one documented
// exception to "no package-level state"): a redis.Script is immutable apart from its
// cached digest, and sharing it lets EVALSHA hit the server's script cache.
var (
	Enqueue   = load("enqueue.lua")
	Promote   = load("promote.lua")
	Claim     = load("claim.lua")
	Heartbeat = load("heartbeat.lua")
	Ack       = load("ack.lua")
	Fail      = load("fail.lua")
	HandBack  = load("handback.lua")
	Reap      = load("reap.lua")
	Retry     = load("retry.lua")
	Cancel    = load("cancel.lua")
	Purge     = load("purge.lua")
)

// All lists every script, for loading them ahead of pipelined EVALSHA calls.
var All = []*redis.Script{Enqueue, Promote, Claim, Heartbeat, Ack, Fail, HandBack, Reap, Retry, Cancel, Purge}

// Source returns the full text Redis runs for the named file (lib.lua prepended).
func Source(name string) (string, error) {
	lib, err := files.ReadFile("lib.lua")
	if err != nil {
		return "", err
	}
	src, err := files.ReadFile(name)
	if err != nil {
		return "", err
	}
	return string(lib) + "\n" + string(src), nil
}

func load(name string) *redis.Script {
	src, err := Source(name)
	if err != nil {
		panic("scripts: " + err.Error()) // embedded at build time: cannot happen
	}
	return redis.NewScript(src)
}

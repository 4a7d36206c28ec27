// Package proto holds what package queue shares with the packages that run jobs (worker,
// cron, the CLI) and that applications have no use for: the limits and wake tokens of
// the Redis protocol, the names of the keys outside any queue, and the hook through which
// package broker reaches a queue.Client's worker side. It is internal so that the queue
// package documents only what applications call, and so the protocol can change between
// releases.
package proto

import (
	"runtime/debug"
	"strconv"
	"time"
)

// MaxBatch is the most jobs one script call handles. A script passes a batch's IDs to
// one Redis command (ZADD, ZREM) through Lua's unpack, which refuses a few thousand
// values, and a script that fails halfway keeps the writes it made: so no batch may grow
// past this. Heartbeat and Ack split larger batches into several calls of at most
// MaxBatch jobs (pipelined, one round trip); Claim cuts n to it; AckClaim refuses more
// finished jobs than this.
const MaxBatch = 1000

// MaxWait bounds one Wait. An idle worker re-checks its queues this often anyway, which
// also covers wake tokens lost with a crashed worker.
const MaxWait = time.Second

// PromoteLimit is the most jobs one Promote call moves from each of the scheduled and
// retry sets: a large backlog that comes due at once is moved over several calls rather
// than in one long script that would stall Redis.
const PromoteLimit = 1000

// ReapLimit is the most expired leases one Reap call handles.
const ReapLimit = 1000

// NoRetry, given to Fail as retryIn, sends the job to the dead set whatever attempts it
// has left.
const NoRetry time.Duration = -1

// Wake tokens: what an idle worker should do when it pops one.
const (
	// WakeReady: a job is ready; claim.
	WakeReady = "r"
	// WakeScheduled: a job was scheduled or set to retry; promote, then plan the wait
	// until it is due.
	WakeScheduled = "s"
)

// CancelNotice says that an operator cancelled an active job (queue.Client.Cancel, `jobs
// cancel`): the worker running it should stop its handler.
type CancelNotice struct {
	Queue, ID string
}

// CronKeys are the keys of the cron scheduler (package cron). They share the hash tag
// {cron}, so a change to the entries and the version bump go in one MULTI on a cluster.
type CronKeys struct {
	Entries string // HASH: entry name -> entry JSON, the dynamic entries
	State   string // HASH: entry name -> JSON {last_tick, last_job, next_tick}
	Version string // STRING: counter bumped on every change of Entries
}

// CronKeysOf returns the cron scheduler's keys under prefix.
func CronKeysOf(prefix string) CronKeys {
	p := prefix + ":{cron}:"
	return CronKeys{Entries: p + "entries", State: p + "state", Version: p + "version"}
}

// CronTickLock names the lock the schedulers race for to fire entry name's tick.
func CronTickLock(prefix, name string, tick time.Time) string {
	return prefix + ":cron:lock:" + name + ":" + strconv.FormatInt(tick.Unix(), 10)
}

// ExclusiveLock names the lock an exclusive job runs under. It is not in any queue's
// slot: exclusive keys are shared across queues, and only redsync touches the lock (one
// key).
func ExclusiveLock(prefix, key string) string { return prefix + ":lock:exclusive:" + key }

// brokerOf is set by package queue when it is initialised: see SetBrokerOf.
var brokerOf func(client any) any

// SetBrokerOf is how package queue hands out a Client's worker side without exporting
// it: queue calls it once, from init, with a function that returns the worker side of a
// *queue.Client. Package broker gives it its type.
func SetBrokerOf(f func(client any) any) { brokerOf = f }

// BrokerOf returns the worker side of client, a *queue.Client (see package broker).
func BrokerOf(client any) any { return brokerOf(client) }

// RegistryKeys are the keys of the registry of live processes (`jobs workers`): an index
// sorted by expiry and one hash per process. They share the hash tag {registry}, so the
// one script that writes both on each beat touches one Redis Cluster slot.
type RegistryKeys struct {
	Index   string // ZSET: process ID -> expiry (ms, Redis's clock)
	Process string // prefix of each process's HASH: Process + id
}

// RegistryKeysOf returns the registry's keys under prefix.
func RegistryKeysOf(prefix string) RegistryKeys {
	p := prefix + ":{registry}:"
	return RegistryKeys{Index: p + "processes", Process: p + "process:"}
}

// DefaultBeat is how often a worker or scheduler renews its entry in the registry. An
// entry lives three beats: a process killed without a word leaves the list within 15 s.
const DefaultBeat = 5 * time.Second

// BeatsToLive is how many beats a registry entry outlives its last renewal: one or two
// failed beats (a Redis restart, a slow network) do not drop a live process.
const BeatsToLive = 3

// Orders an operator leaves in a process's registry entry (`jobs workers quiet|stop`);
// the process reads them in the reply to its next beat.
const (
	// OrderQuiet: stop claiming jobs; finish (and keep renewing) the running ones.
	OrderQuiet = "quiet"
	// OrderStop: shut down gracefully, as on SIGTERM.
	OrderStop = "stop"
)

// Version is the version of the running binary's main module ("(devel)" for a build
// from a work tree, "" without build information), shown in the registry.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}

// Package proto holds what package queue shares with the packages that run jobs (worker,
// cron, the CLI) and that applications have no use for: the limits and wake tokens of
// the Redis protocol, the names of the keys outside any queue, and the hook through which
// package broker reaches a queue.Client's worker side. It is internal so that the queue
// package documents only what applications call, and so the protocol can change between
// releases.
package proto

import (
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
	// WakeOutbox: a job ended whose dependent or batch is in another queue's slot; reap
	// (whose reply says the outbox holds entries), then deliver them.
	WakeOutbox = "o"
)

// Waiter is a worker's registration for hand-offs: an enqueue that finds its queue's ready
// list empty claims the job for a registered worker and pushes it on the worker's hand
// list, which the worker's wait includes (see queue's handoff.go). Made by the broker's
// Waiter; passed to AckClaimWaiting (whose claim registers it when it runs the queue dry)
// and WaitHanded.
type Waiter struct {
	Worker string        // the worker's ID (as in claims): its hand lists are named from it
	Member string        // its entry in a queue's waiters set: "<lease_ms>\t<token prefix>\t<worker>"
	Lease  time.Duration // the lease of the jobs handed to it
}

// WaiterFor is how long a registration lasts after the claim that made it: one wait
// (MaxWait, which Redis rounds up to its next internal tick) and a margin for the loop's
// turn between the claim and the wait. A waiter that died is handed jobs for at most
// this long; their leases expire and the reaper puts them back.
const WaiterFor = MaxWait + 500*time.Millisecond

// Limited is what a claim's reply says of its queue's limits (jobs:{q}:limit).
type Limited struct {
	// Concurrency is the queue's concurrency limit (0: none), and Free the slots the
	// claim left free under it: a worker claims ahead (jobs it buffers hold slots others
	// could run) only into part of what is free.
	Concurrency, Free int
	// By is why the claim got fewer jobs than it asked for while jobs were left ready:
	// LimitConcurrency, LimitRate or LimitKeys; "" when no limit cut it.
	By string
	// Wait is, with By, how long until the next slot frees at the latest (the earliest
	// lease deadline; a slot freed before wakes a waiting worker with a wake token) or
	// the next rate token is due (exactly).
	Wait time.Duration
	// Now is Redis's time when the claim ran: a job whose StartedAt is after it was
	// claimed ahead under a rate, and starts StartedAt - Now after the reply came (its
	// token's instant, never before).
	Now time.Time
}

// Why a claim was cut short (Limited.By).
const (
	LimitConcurrency = "concurrency"
	LimitRate        = "rate"
	// LimitKeys: every limit key with jobs waits on its own limits, and no job without a
	// key is ready. Wait is until the first key is due; a job of a key ending before
	// brings its key forward with a wake token.
	LimitKeys = "keys"
)

// CancelNotice says that an operator cancelled an active job (queue.Client.Cancel, `jobs
// cancel`): the worker running it should stop its handler. A notice with an empty ID
// says that the limits of Queue changed (queue.Client.SetLimit, `jobs limit`): workers
// waiting on the old limits claim again.
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

// Progress is what a handler last reported of how far its job has got (worker.Progress,
// or an exec handler's lines on file descriptor 3): a percentage from 0 to 100 and a
// short message. The worker sends it with a heartbeat (see queue's HeartbeatProgress).
type Progress struct {
	Percent int
	Message string
}

// MaxProgressMessage is the longest progress message stored, in bytes; a longer one is
// cut at a UTF-8 boundary. A message over 64 bytes turns the job's hash from Redis's
// compact listpack encoding into a hashtable (more memory while the job is kept).
const MaxProgressMessage = 200

// CutProgressMessage returns msg cut to at most MaxProgressMessage bytes, at a UTF-8
// boundary.
func CutProgressMessage(msg string) string {
	if len(msg) <= MaxProgressMessage {
		return msg
	}
	n := MaxProgressMessage
	for n > 0 && !utf8.RuneStart(msg[n]) {
		n--
	}
	return msg[:n]
}

// The metrics history (queue's History, the worker's flushes): each worker adds up what
// it ran per queue, job type and minute, and flushes it about every 10 s.

// HistBuckets is the number of buckets of the run-time and wait-time histograms. Bucket k
// holds durations d with 2^((k-1)/2) ms < d <= 2^(k/2) ms: bucket 0 everything up to 1 ms,
// bucket 1 up to 1.414 ms, bucket 2 up to 2 ms, ..., bucket 47 up to 2^23.5 ms (3 h 53 min),
// and bucket 48 everything longer. Half-octave buckets: a quantile read as its bucket's
// upper bound is at most 41% above the true value.
const HistBuckets = 49

// HistBucket returns the histogram bucket of d: the first k whose upper bound is d or
// more (48 when none is). A worker calls it twice a job: a search of the bounds, not the
// logarithm and the two powers that computing them takes.
func HistBucket(d time.Duration) int {
	if d <= time.Millisecond {
		return 0
	}
	k, _ := slices.BinarySearch(histUpper[:], d)
	return k
}

// HistUpper returns the upper bound of bucket k, rounded to the microsecond; the last
// bucket, which has none, returns the bound of the one before it.
func HistUpper(k int) time.Duration {
	return histUpper[min(max(k, 0), HistBuckets-2)]
}

// histUpper holds the upper bounds of buckets 0 to 47: 2^(k/2) ms, rounded to the
// microsecond (strictly increasing: the smallest step, from bucket 0 to 1, is 414 us).
var histUpper = func() (b [HistBuckets - 1]time.Duration) {
	for k := range b {
		b[k] = time.Duration(math.Round(math.Pow(2, float64(k)/2)*1000)) * time.Microsecond
	}
	return b
}()

// MetricsSample is what one worker saw of one job type on one queue in one minute.
type MetricsSample struct {
	Queue, Type string
	// Minute is the minute (Unix ms / 60,000, by Redis's clock) in which the attempts
	// ended.
	Minute int64
	// Processed counts attempts that ended (done, retry, dead), Failed those that failed.
	Processed, Failed int64
	// Run and Wait are histograms (see HistBucket) of the handlers' run time and of the
	// wait from a job's due time to the claim of the attempt.
	Run, Wait [HistBuckets]int64
}

// Add adds o's counts to s.
func (s *MetricsSample) Add(o *MetricsSample) {
	s.Processed += o.Processed
	s.Failed += o.Failed
	for k := range s.Run {
		s.Run[k] += o.Run[k]
		s.Wait[k] += o.Wait[k]
	}
}

// Retention of the metrics history: minute buckets 48 hours, hour buckets 30 days. The
// daily counts are the queue's stats counters (jobs:{q}:stats:processed:<day>, written by
// the transition scripts themselves), kept StatsRetention.
const (
	MetricsMinuteRetention = 48 * time.Hour
	MetricsHourRetention   = 30 * 24 * time.Hour
	StatsRetention         = 90 * 24 * time.Hour
)

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
// from a work tree, "" without build information), with the commit it was built from
// when Go recorded one and the version does not name it already: "(devel) (rev
// 1a2b3c4d5e6f, modified)". Shown in the registry (jobs workers) and by jobs --version.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return VersionOf(bi)
	}
	return ""
}

// VersionOf is Version for the build information bi.
func VersionOf(bi *debug.BuildInfo) string {
	v, rev, modified := bi.Main.Version, "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	rev = rev[:min(len(rev), 12)]
	if rev == "" || strings.Contains(v, rev) { // a pseudo-version names its commit (and +dirty)
		return v
	}
	if modified {
		return v + " (rev " + rev + ", modified)"
	}
	return v + " (rev " + rev + ")"
}

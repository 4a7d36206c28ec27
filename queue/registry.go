package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/scripts"
)

// The registry of live processes: every worker and scheduler renews its entry each beat
// (5s by default) with one script call, and an entry expires three beats after its last
// renewal, so a process killed without a word leaves the list by itself. Nothing here
// asks Redis for its connections (CLIENT LIST): managed Redis and ACL users forbid it,
// and a connection says nothing about queues or jobs.

// Kinds of process in the registry.
const (
	KindWorker    = "worker"
	KindScheduler = "scheduler"
)

// ProcessState is what a live process is doing.
type ProcessState string

// Process states.
const (
	// ProcessRunning: a worker claims and runs jobs; a scheduler fires its entries.
	ProcessRunning ProcessState = "running"
	// ProcessQuiet: told to be quiet ([Client.Quiet]), a worker claims no more jobs and
	// finishes the running ones (still renewing their leases); a scheduler fires nothing.
	ProcessQuiet ProcessState = "quiet"
	// ProcessStopping: shutting down (SIGTERM, [Client.Stop], Run's context ended).
	ProcessStopping ProcessState = "stopping"
)

// Process is one live worker or scheduler as the registry lists it. JSON field names are
// the `jobs workers --json` contract.
type Process struct {
	ID          string         `json:"id"`
	Kind        string         `json:"kind"` // KindWorker or KindScheduler
	Host        string         `json:"host"`
	PID         int            `json:"pid"`
	Version     string         `json:"version"` // the binary's main module version
	Queues      map[string]int `json:"queues"`  // queue -> weight; none for a scheduler
	Types       []string       `json:"types"`   // job types it has handlers for, when known
	Concurrency int            `json:"concurrency"`
	Busy        int            `json:"busy"` // handlers running at its last beat
	State       ProcessState   `json:"state"`
	StartedAt   time.Time      `json:"started_at"` // Redis's clock
	BeatAt      time.Time      `json:"beat_at"`    // its last beat, Redis's clock
	// Running are the jobs it holds, read from each of its queues' active set (at most
	// runningReadMax per queue): those claimed ahead and not started yet included.
	Running []RunningJob `json:"running"`
}

// RunningJob is a job a worker holds: active, with the worker's ID in its hash.
type RunningJob struct {
	ID        string    `json:"id"`
	Queue     string    `json:"queue"`
	Type      string    `json:"type"`
	StartedAt time.Time `json:"started_at"`
}

// runningReadMax bounds how many active jobs per queue [Client.Processes] reads to find
// what each worker runs: the read is one pipelined round trip, never a scan.
const runningReadMax = 1000

// Processes returns the live workers and schedulers, oldest first, each with the jobs it
// runs. It reads the registry (two round trips) and, for the queues the workers serve,
// their active jobs (two more, pipelined).
func (c *Client) Processes(ctx context.Context) ([]*Process, error) {
	ps, _, err := c.processes(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.addRunning(ctx, ps); err != nil {
		return nil, err
	}
	return ps, nil
}

// Quiet tells the live process id to be quiet: a worker stops claiming and finishes its
// running jobs, a scheduler stops firing. It obeys at its next beat (within 5s by
// default) and stays quiet until it stops. An unknown ID is ErrNoProcess.
func (c *Client) Quiet(ctx context.Context, id string) error {
	return c.order(ctx, id, proto.OrderQuiet)
}

// Stop tells the live process id to shut down gracefully, as SIGTERM would: a worker
// stops claiming, lets running jobs finish within its shutdown timeout and hands back the
// rest, then its Run returns nil (`jobs worker` exits 0). It obeys at its next beat. An
// unknown ID is ErrNoProcess.
func (c *Client) Stop(ctx context.Context, id string) error {
	return c.order(ctx, id, proto.OrderStop)
}

func (c *Client) order(ctx context.Context, id, order string) error {
	if id == "" {
		return invalid("process ID is empty")
	}
	rk := proto.RegistryKeysOf(c.cfg.Prefix)
	var res string
	err := sent(ctx, order+" "+id, func() (err error) {
		res, err = c.run(ctx, scripts.Order, []string{rk.Index, rk.Process + id}, id, order).Text()
		return err
	})
	if err != nil {
		return err
	}
	if res == "missing" {
		return fmt.Errorf("%s %s: %w", order, id, ErrNoProcess)
	}
	return nil
}

// Register is a process's beat (see register.lua): it writes p's entry, to expire after
// ttl, and returns the order an operator left ("", proto.OrderQuiet, proto.OrderStop) and
// the entry's start time. p.StartedAt is zero on the first beat (now is taken); later
// beats pass back the time returned, so a Redis that lost its data relists the process
// with its real start.
func (c broker) Register(ctx context.Context, p *Process, ttl time.Duration) (order string, startedAt time.Time, err error) {
	rk := proto.RegistryKeysOf(c.cfg.Prefix)
	queues, _ := json.Marshal(p.Queues)
	types, _ := json.Marshal(p.Types)
	var started int64
	if !p.StartedAt.IsZero() {
		started = p.StartedAt.UnixMilli()
	}
	res, err := c.run(ctx, scripts.Register, []string{rk.Index, rk.Process + p.ID}, p.ID, max(ms(ttl), 1), started,
		"kind", p.Kind, "host", p.Host, "pid", p.PID, "version", p.Version, "queues", queues, "types", types,
		"concurrency", p.Concurrency, "busy", p.Busy, "state", string(p.State)).Slice()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("register %s: %w", p.ID, err)
	}
	if len(res) != 2 {
		return "", time.Time{}, fmt.Errorf("register %s: %w", p.ID, errBadReply)
	}
	order, _ = res[0].(string)
	n, _ := res[1].(int64)
	return order, time.UnixMilli(n), nil
}

// Deregister removes process id from the registry: a clean stop is gone from the list at
// once.
func (c broker) Deregister(ctx context.Context, id string) error {
	rk := proto.RegistryKeysOf(c.cfg.Prefix)
	if err := c.run(ctx, scripts.Deregister, []string{rk.Index, rk.Process + id}, id).Err(); err != nil {
		return fmt.Errorf("deregister %s: %w", id, err)
	}
	return nil
}

// processes reads the live entries of the registry, oldest first, and Redis's time.
// Entries whose expiry passed are skipped (their process died; the next beat of any
// process removes them from the index).
func (c *Client) processes(ctx context.Context) ([]*Process, time.Time, error) {
	rk := proto.RegistryKeysOf(c.cfg.Prefix)
	pipe := c.rdb.Pipeline()
	now := pipe.Time(ctx)
	index := pipe.ZRangeWithScores(ctx, rk.Index, 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, time.Time{}, fmt.Errorf("read the registry: %w", err)
	}
	nowMS := now.Val().UnixMilli()
	var ids []string
	for _, z := range index.Val() {
		if id, ok := z.Member.(string); ok && int64(z.Score) > nowMS {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, now.Val(), nil
	}
	pipe = c.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, rk.Process+id)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, time.Time{}, fmt.Errorf("read the registry: %w", err)
	}
	var ps []*Process
	for i, cmd := range cmds {
		if h := cmd.Val(); len(h) > 0 {
			ps = append(ps, decodeProcess(ids[i], h))
		}
	}
	slices.SortStableFunc(ps, func(a, b *Process) int {
		if d := a.StartedAt.Compare(b.StartedAt); d != 0 {
			return d
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return ps, now.Val(), nil
}

// decodeProcess reads a registry hash. A field that does not parse reads as its zero
// value: the entry is informative, and a hand-edited one must not break the listing.
func decodeProcess(id string, h map[string]string) *Process {
	p := &Process{ID: id, Kind: h["kind"], Host: h["host"], PID: atoi(h["pid"]), Version: h["version"],
		Concurrency: atoi(h["concurrency"]), Busy: atoi(h["busy"]), State: ProcessState(h["state"]),
		StartedAt: msTime(h["started_at"]), BeatAt: msTime(h["beat_at"]), Running: []RunningJob{}}
	_ = json.Unmarshal([]byte(h["queues"]), &p.Queues)
	_ = json.Unmarshal([]byte(h["types"]), &p.Types)
	if p.Queues == nil {
		p.Queues = map[string]int{}
	}
	if p.Types == nil {
		p.Types = []string{}
	}
	return p
}

// addRunning fills in each worker's Running jobs: the active jobs of the queues the
// workers serve (at most runningReadMax per queue), matched by the job hash's worker
// field. Two pipelined round trips, whatever the number of queues and workers.
func (c *Client) addRunning(ctx context.Context, ps []*Process) error {
	byID := map[string]*Process{}
	var queues []string
	for _, p := range ps {
		byID[p.ID] = p
		for q := range p.Queues {
			if ValidateQueue(q) == nil && !slices.Contains(queues, q) {
				queues = append(queues, q)
			}
		}
	}
	if len(queues) == 0 {
		return nil
	}
	slices.Sort(queues)
	pipe := c.rdb.Pipeline()
	actives := make([]*redis.StringSliceCmd, len(queues))
	for i, q := range queues {
		actives[i] = pipe.ZRange(ctx, c.keys.queue(q).active, 0, runningReadMax-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("read active jobs: %w", err)
	}
	type ref struct{ queue, id string }
	var refs []ref
	pipe = c.rdb.Pipeline()
	var fields []*redis.SliceCmd
	for i, q := range queues {
		for _, id := range actives[i].Val() {
			refs = append(refs, ref{q, id})
			fields = append(fields, pipe.HMGet(ctx, c.keys.queue(q).job(id), "worker", "type", "started_at"))
		}
	}
	if len(refs) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read active jobs: %w", err)
	}
	for i, cmd := range fields {
		v := cmd.Val()
		if len(v) != 3 {
			continue
		}
		worker, _ := v[0].(string)
		p := byID[worker]
		if p == nil {
			continue // a worker that died: its job waits for the reaper
		}
		typ, _ := v[1].(string)
		started, _ := v[2].(string)
		p.Running = append(p.Running, RunningJob{ID: refs[i].id, Queue: refs[i].queue, Type: typ, StartedAt: msTime(started)})
	}
	for _, p := range ps {
		slices.SortStableFunc(p.Running, func(a, b RunningJob) int { return a.StartedAt.Compare(b.StartedAt) })
	}
	return nil
}

// workersPerQueue counts the live workers claiming from each queue: quiet and stopping
// ones claim nothing.
func workersPerQueue(ps []*Process) map[string]int {
	n := map[string]int{}
	for _, p := range ps {
		if p.Kind != KindWorker || p.State != ProcessRunning {
			continue
		}
		for q := range p.Queues {
			n[q]++
		}
	}
	return n
}

// readySince is when ready job id became due: its run_at (delayed or retried) or its
// enqueue time, from the fields of its hash (created_at, or the ID's time when the hash
// has none: see jobFields.done).
func readySince(id, createdAt, runAt string) time.Time {
	if t := msTime(runAt); !t.IsZero() {
		return t
	}
	if createdAt == "" {
		return idTime(id)
	}
	return msTime(createdAt)
}

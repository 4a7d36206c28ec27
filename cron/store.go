package cron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/queue"
)

// Store holds the dynamic entries in Redis (jobs:{cron}:entries), which every running
// scheduler picks up within about half a second of a change, and each entry's state.
type Store struct {
	client *queue.Client // checks entries as its Enqueue would check their jobs
	rdb    redis.UniversalClient
	keys   proto.CronKeys
}

// NewStore returns the store of client's Redis and prefix.
func NewStore(client *queue.Client) *Store {
	return &Store{client: client, rdb: broker.Of(client).Redis(), keys: proto.CronKeysOf(client.Config().Prefix)}
}

// Add validates e, and the job it enqueues as the client's Enqueue would, then adds or
// replaces the dynamic entry of that name. An entry whose job Enqueue would refuse is an
// error here rather than a tick lost on every run.
func (s *Store) Add(ctx context.Context, e Entry) error {
	if err := e.check(s.client); err != nil {
		return err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	cmds, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.keys.Entries, e.Name, b)
		p.Incr(ctx, s.keys.Version)
		return nil
	})
	if err != nil {
		return fmt.Errorf("add cron entry %s: %w", e.Name, txErr(err, cmds))
	}
	return nil
}

// txErr is the error of a failed MULTI/EXEC. When Redis refused a queued command (OOM on
// a full Redis) it discards the transaction with EXECABORT, which says nothing of why:
// the refused command's own error does.
func txErr(err error, cmds []redis.Cmder) error {
	if !strings.HasPrefix(err.Error(), "EXECABORT") {
		return err
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !strings.HasPrefix(cerr.Error(), "EXECABORT") {
			return cerr
		}
	}
	return err
}

// Remove deletes the dynamic entry name, or returns ErrNotFound.
func (s *Store) Remove(ctx context.Context, name string) error {
	var del *redis.IntCmd
	cmds, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.HDel(ctx, s.keys.Entries, name)
		p.HDel(ctx, s.keys.State, name)
		p.Incr(ctx, s.keys.Version)
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove cron entry %s: %w", name, txErr(err, cmds))
	}
	if del.Val() == 0 {
		return fmt.Errorf("remove cron entry %s: %w", name, ErrNotFound)
	}
	return nil
}

// List returns the dynamic entries, sorted by name. An entry that no longer decodes or
// validates (Add's checks: written by hand or by an older version) is left out and
// reported in the error, never silently dropped, so that no scheduler fires it.
func (s *Store) List(ctx context.Context) ([]Entry, error) {
	h, err := s.rdb.HGetAll(ctx, s.keys.Entries).Result()
	if err != nil {
		return nil, fmt.Errorf("list cron entries: %w", err)
	}
	entries := make([]Entry, 0, len(h))
	var bad []error
	for name, raw := range h {
		var e Entry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			bad = append(bad, fmt.Errorf("cron entry %s: %w", name, err))
			continue
		}
		if err := e.check(s.client); err != nil {
			bad = append(bad, err)
			continue
		}
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return entries, errors.Join(bad...)
}

// Version returns the change counter of the dynamic entries.
func (s *Store) Version(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.keys.Version).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// State is what the schedulers recorded about an entry.
type State struct {
	LastTick time.Time `json:"last_tick"`
	LastJob  string    `json:"last_job"`
	NextTick time.Time `json:"next_tick"`
}

// States returns the recorded state of every entry that has fired.
func (s *Store) States(ctx context.Context) (map[string]State, error) {
	h, err := s.rdb.HGetAll(ctx, s.keys.State).Result()
	if err != nil {
		return nil, fmt.Errorf("cron states: %w", err)
	}
	out := make(map[string]State, len(h))
	for name, raw := range h {
		var st State
		if json.Unmarshal([]byte(raw), &st) == nil {
			out[name] = st
		}
	}
	return out, nil
}

func (s *Store) record(ctx context.Context, name string, st State) error {
	b, _ := json.Marshal(st)
	return s.rdb.HSet(ctx, s.keys.State, name, b).Err()
}

// Listed is a dynamic entry with what the schedulers recorded about it: the shape of
// `jobs cron ls --json` and of the dashboard's /cron page.
type Listed struct {
	Entry
	LastTick *time.Time `json:"last_tick"` // nil before its first tick
	LastJob  string     `json:"last_job"`
	NextTick *time.Time `json:"next_tick"` // its first tick after now; nil if it never fires
}

// Listing returns the dynamic entries with their last and next tick after now. Like
// List, it returns the good entries and an error naming the broken ones.
func (s *Store) Listing(ctx context.Context, now time.Time) ([]Listed, error) {
	entries, listErr := s.List(ctx)
	if entries == nil && listErr != nil {
		return nil, listErr
	}
	states, err := s.States(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]Listed, 0, len(entries))
	for _, en := range entries {
		r := Listed{Entry: en}
		if st := states[en.Name]; !st.LastTick.IsZero() {
			t := st.LastTick.UTC()
			r.LastTick, r.LastJob = &t, st.LastJob
		}
		if next := en.Next(now); !next.IsZero() {
			t := next.UTC()
			r.NextTick = &t
		}
		rows = append(rows, r)
	}
	return rows, listErr
}

// Trigger enqueues the job of the dynamic entry name now, as a tick at now (to the
// second) would: same queue and options, ID JobID(name, now), so it is the very job a
// scheduler firing that second would enqueue, and a second trigger within the second is
// queue.ErrDuplicate. It returns the job's ID; an unknown name is ErrNotFound.
//
// The trigger is recorded as the entry's last tick, with its job as the last job (what
// `jobs cron ls` and the dashboard show), as a scheduler records the ticks it fires: a
// scheduler starting with CatchUp then takes it as the latest run, so it does not fire
// again a tick missed before it.
func (s *Store) Trigger(ctx context.Context, name string, now time.Time) (string, error) {
	entries, err := s.List(ctx)
	if entries == nil && err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name != name {
			continue
		}
		opts, err := e.options(now)
		if err != nil {
			return "", fmt.Errorf("trigger cron entry %s: %w", name, err)
		}
		id, err := s.client.Enqueue(ctx, e.Type, []byte(e.Payload), opts...)
		if err != nil {
			return "", fmt.Errorf("trigger cron entry %s: %w", name, err)
		}
		tick := now.Truncate(time.Second)
		st := State{LastTick: tick, LastJob: id, NextTick: e.Next(tick)}
		if err := s.record(ctx, name, st); err != nil {
			return id, fmt.Errorf("trigger cron entry %s: job %s enqueued, not recorded as its last: %w", name, id, err)
		}
		return id, nil
	}
	return "", fmt.Errorf("trigger cron entry %s: %w", name, ErrNotFound)
}

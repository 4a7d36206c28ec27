package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// jobs limit set, ls and rm: limits kept in Redis, listed with what the queue waits on,
// and bad input refused with one line and exit 2.
func TestLimitCommands(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, args := range [][]string{
		{"limit", "set", "exports", "--concurrency", "2"},
		{"limit", "set", "payments", "--rate", "10/s", "--burst", "3"},
	} {
		if r := jobs(t, p, "", args...); r.code != 0 || r.stderr != "" {
			t.Fatalf("jobs %v = %+v, want exit 0", args, r)
		}
	}
	for range 3 {
		jobs(t, p, "", "enqueue", "--queue", "exports", "export")
	}
	r := jobs(t, p, "", "limit", "ls", "--json")
	var rows []limitRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("limit ls --json = %+v (%v), want two queues", r, err)
	}
	if rows[0].Queue != "exports" || rows[0].Concurrency != 2 || rows[0].Running != 0 || rows[0].Waiting != "" ||
		rows[1].Queue != "payments" || rows[1].Rate != 10 || rows[1].PeriodMS != 1000 || rows[1].Burst != 3 {
		t.Errorf("limit ls --json = %+v, want exports concurrency 2 and payments 10/1000ms burst 3, nothing waiting", rows)
	}
	if r := jobs(t, p, "", "limit", "ls"); !strings.Contains(r.stdout, "payments  -            10/1s  3") {
		t.Errorf("limit ls = %q, want a row for payments", r.stdout)
	}
	// Two of exports' jobs claimed: the third waits on the concurrency limit, and stats and
	// inspect say so.
	client, err := queue.NewClient(redistest.Shared(t).Client(t), queue.Config{Prefix: p})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := broker.Of(client).Claim(context.Background(), "exports", 5, time.Minute, "w"); err != nil || len(got) != 2 {
		t.Fatalf("Claim() = %d jobs, %v; want 2 (concurrency 2)", len(got), err)
	}
	r = jobs(t, p, "", "stats", "--json")
	if !strings.Contains(r.stdout, `"name":"exports","ready":1,`) || !strings.Contains(r.stdout, `"waiting_on":"concurrency"`) ||
		!strings.Contains(r.stdout, `"waiting_until":"`) {
		t.Errorf("stats --json = %s, want exports waiting on its concurrency limit", r.stdout)
	}
	if r := jobs(t, p, "", "stats"); !strings.Contains(r.stdout, "concurrency until ") {
		t.Errorf("stats = %s, want exports waiting on its concurrency limit", r.stdout)
	}
	ready, err := client.List(context.Background(), "exports", queue.StateReady, 0, 1)
	if err != nil || len(ready) != 1 {
		t.Fatalf("List(ready) = %v, %v", ready, err)
	}
	if r := jobs(t, p, "", "inspect", ready[0].ID); !strings.Contains(r.stdout, "waiting on  the queue's concurrency limit (concurrency 2, 2 running) until ") {
		t.Errorf("inspect of a job held back by the limit = %s, want it to say so", r.stdout)
	}
	if r := jobs(t, p, "", "limit", "rm", "payments", "--rate"); r.code != 0 {
		t.Fatalf("limit rm --rate = %+v", r)
	}
	if r := jobs(t, p, "", "limit", "ls"); strings.Contains(r.stdout, "payments") {
		t.Errorf("limit ls after removing payments' only limit = %q, want it gone", r.stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"limit", "set", "q"}, "needs --concurrency, --rate, --key-concurrency or --key-rate"},
		{[]string{"limit", "set", "q", "--key-concurrency", "0"}, "--key-concurrency must be a positive integer"},
		{[]string{"limit", "set", "q", "--key-rate", "5"}, `--key-rate "5": want N/PERIOD`},
		{[]string{"limit", "set", "q", "--key-burst", "2"}, "--key-burst needs --key-rate"},
		{[]string{"limit", "set", "q", "--key", "k"}, "needs --concurrency"},
		{[]string{"limit", "set", "q", "--key", "k", "--concurrency", "2", "--key-concurrency", "1"}, "--key sets key limits only"},
		{[]string{"limit", "set", "q", "--key", "", "--key-concurrency", "1"}, "--key '': an empty value"},
		{[]string{"limit", "rm", "q", "--key", "k", "--rate"}, "give it alone"},
		{[]string{"enqueue", "--limit-key", "", "t"}, "--limit-key '': an empty value"},
		{[]string{"enqueue", "--limit-key", "a\tb", "t"}, "limit key"},
		{[]string{"limit", "set", "q", "--concurrency", "0"}, "--concurrency must be a positive integer, got 0"},
		{[]string{"limit", "set", "q", "--concurrency", "-3"}, "--concurrency must be a positive integer, got -3"},
		{[]string{"limit", "set", "q", "--concurrency", "many"}, "many"},
		{[]string{"limit", "set", "q", "--rate", "20"}, "want N/PERIOD"},
		{[]string{"limit", "set", "q", "--rate", "0/s"}, "positive integer"},
		{[]string{"limit", "set", "q", "--rate", "5/fortnight"}, "positive duration"},
		{[]string{"limit", "set", "q", "--rate", "5/1500us"}, "whole milliseconds"},
		{[]string{"limit", "set", "q", "--burst", "4"}, "--burst needs --rate"},
		{[]string{"limit", "set", "q", "--rate", "5/s", "--burst", "0"}, "--burst must be a positive integer"},
		{[]string{"limit", "set", "bad queue", "--concurrency", "1"}, "queue name"},
		{[]string{"limit", "set"}, "one queue name"},
		{[]string{"limit", "rm"}, "one queue name"},
	} {
		r := jobs(t, p, "", tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("jobs %v = %+v, want exit 2 and one line saying %q", tc.args, r, tc.want)
		}
	}
}

// Per-key limits from the CLI: jobs enqueue --limit-key (and limit_key in --file), jobs
// limit set --key-concurrency with and without --key, listed by jobs limit ls (text and
// JSON), removed by jobs limit rm --key and --keys.
func TestLimitKeyCommands(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, args := range [][]string{
		{"limit", "set", "mail", "--key-concurrency", "1", "--key-rate", "10/m", "--key-burst", "2"},
		{"limit", "set", "mail", "--key-concurrency", "3", "--key", "big", "--key", "bigger"},
		{"enqueue", "--queue", "mail", "--limit-key", "big", "send"},
	} {
		if r := jobs(t, p, "", args...); r.code != 0 || r.stderr != "" {
			t.Fatalf("jobs %v = %+v, want exit 0", args, r)
		}
	}
	file := `{"type":"send","queue":"mail","limit_key":"small"}` + "\n" + `{"type":"send","queue":"mail"}` + "\n"
	if r := jobs(t, p, file, "enqueue", "--file", "-"); r.code != 0 {
		t.Fatalf("enqueue --file with limit_key = %+v", r)
	}
	r := jobs(t, p, "", "limit", "ls", "--json")
	var rows []limitRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("limit ls --json = %+v (%v), want one queue", r, err)
	}
	q := rows[0]
	if q.KeyConcurrency != 1 || q.KeyRate != 10 || q.KeyPeriodMS != 60000 || q.KeyBurst != 2 || q.KeysWaiting != 2 {
		t.Errorf("limit ls --json = %+v, want key concurrency 1, key rate 10/60000ms burst 2, 2 keys waiting", q)
	}
	keys := map[string]keyRow{}
	for _, k := range q.Keys {
		keys[k.Key] = k
	}
	if k := keys["big"]; !k.Own || k.Concurrency != 3 || !k.Ready || k.Due == nil {
		t.Errorf("key big = %+v, want its own concurrency 3, a job ready and due", k)
	}
	if k := keys["small"]; k.Own || k.Concurrency != 1 || k.Rate != 10 || !k.Ready {
		t.Errorf("key small = %+v, want the default, a job ready", k)
	}
	if _, ok := keys["bigger"]; !ok {
		t.Errorf("keys = %+v, want bigger (its own limits, no job)", q.Keys)
	}
	out := jobs(t, p, "", "limit", "ls").stdout
	for _, want := range []string{"QUEUE  KEY     CONCURRENCY  RATE     BURST  RUNNING  DUE", "mail   *       1            10/1m0s  2", "mail   big     3"} {
		if !strings.Contains(out, want) {
			t.Errorf("limit ls = %q, want %q", out, want)
		}
	}
	if r := jobs(t, p, "", "limit", "rm", "mail", "--key", "big"); r.code != 0 {
		t.Fatalf("limit rm --key = %+v", r)
	}
	if r := jobs(t, p, "", "limit", "rm", "mail", "--keys"); r.code != 0 {
		t.Fatalf("limit rm --keys = %+v", r)
	}
	json.Unmarshal([]byte(jobs(t, p, "", "limit", "ls", "--json").stdout), &rows)
	if len(rows) != 1 || rows[0].KeyConcurrency != 0 || len(rows[0].Keys) != 2 || rows[0].Keys[0].Own || rows[0].Keys[1].Own {
		t.Errorf("limit ls --json after rm = %+v, want no key limits left, the two keys still waiting", rows)
	}
}

// jobs inspect says when a ready job waits on a limit, and until when: its queue's, or
// its limit key's; --json as waiting_on and waiting_until.
func TestInspectWaitingOnLimit(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	ctx := context.Background()
	client, err := queue.NewClient(redistest.Shared(t).Client(t), queue.Config{Prefix: p})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetLimit(ctx, "q", queue.Limit{KeyConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := client.EnqueueBatch(ctx, []queue.BatchJob{
		{Type: "t", Options: []queue.Option{queue.On("q"), queue.LimitKey("cust-1")}},
		{Type: "t", Options: []queue.Option{queue.On("q"), queue.LimitKey("cust-1")}},
		{Type: "t", Options: []queue.Option{queue.On("q")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := broker.Of(client).Claim(ctx, "q", 1, time.Minute, "w"); err != nil || len(got) != 1 {
		t.Fatalf("Claim() = %d jobs, %v", len(got), err)
	}
	// The claim of one took the first job of "cust-1" or the unkeyed one (keyed and
	// unkeyed jobs take turns): then the next claim takes the first of "cust-1".
	waiting := res[1].ID
	if j, _ := client.Get(ctx, "q", res[0].ID); j.State == queue.StateReady {
		if got, err := broker.Of(client).Claim(ctx, "q", 5, time.Minute, "w"); err != nil || len(got) != 1 || got[0].ID != res[0].ID {
			t.Fatalf("second Claim() = %d jobs, %v; want the first of cust-1", len(got), err)
		}
	}
	r := jobs(t, p, "", "inspect", "--json", waiting)
	var v map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("inspect --json = %+v: %v", r, err)
	}
	until, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(v["waiting_until"]))
	if v["waiting_on"] != "key concurrency" || v["limit_key"] != "cust-1" || time.Until(until) < 50*time.Second {
		t.Errorf("inspect --json of a job its key's concurrency holds back = %s; want waiting_on key concurrency, "+
			"limit_key, waiting_until about the lease (1m) away", r.stdout)
	}
	if r := jobs(t, p, "", "inspect", waiting); !strings.Contains(r.stdout, `waiting on  its limit key "cust-1" (key concurrency, 1 running) until `) {
		t.Errorf("inspect = %s, want it to say the key's concurrency holds it back", r.stdout)
	}
	if r := jobs(t, p, "", "inspect", "--json", res[2].ID); r.code != 0 || strings.Contains(r.stdout, "waiting_on") {
		t.Errorf("inspect --json of a job nothing holds back = %s, want no waiting_on", r.stdout)
	}
}

// jobs resume --key ends a handler's pause of a limit key (exit 77 for 1000h could not be
// lifted before); an empty or bad key is a usage error.
func TestResumeKey(t *testing.T) {
	p := redistest.Prefix(t)
	client, err := queue.NewClient(redistest.Shared(t).Client(t), queue.Config{Prefix: p})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, "sync", nil, queue.On("crm"), queue.LimitKey("cust:1")); err != nil {
		t.Fatal(err)
	}
	got, err := broker.Of(client).Claim(ctx, "crm", 1, time.Minute, "w")
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim() = %d jobs, %v", len(got), err)
	}
	if err := broker.Of(client).PauseKey(ctx, got[0], 1000*time.Hour, "429"); err != nil {
		t.Fatal(err)
	}
	if r := jobs(t, p, "", "resume", "crm", "--key", "cust:1"); r.code != 0 || r.stdout != "limit key cust:1 of crm resumed\n" {
		t.Errorf("resume --key = %+v, want it resumed", r)
	}
	if r := jobs(t, p, "", "resume", "crm", "--key", "cust:1"); r.code != 0 || r.stdout != "limit key cust:1 of crm is not paused: nothing to resume\n" {
		t.Errorf("resume --key again = %+v, want not paused, exit 0", r)
	}
	if got, err := broker.Of(client).Claim(ctx, "crm", 1, time.Minute, "w"); err != nil || len(got) != 1 {
		t.Errorf("Claim() after resume --key = %d jobs, %v; want the paused job", len(got), err)
	}
	for _, k := range []string{"", "a\x1bb"} {
		if r := jobs(t, p, "", "resume", "crm", "--key", k); r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("resume --key %q = %+v, want exit 2 and a one-line error", k, r)
		}
	}
}

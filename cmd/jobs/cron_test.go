package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

func TestCronAddLsRm(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	if r := jobs(t, p, "", "cron", "add", "--queue", "low", "--max-retry", "2", "--exclusive", "nightly", "0 0 3 * * *", "report", `{"x":1}`); r.code != 0 {
		t.Fatalf("cron add = %+v", r)
	}
	r := jobs(t, p, "", "cron", "ls", "--json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("cron ls --json = %q, %v", r.stdout, err)
	}
	row := rows[0]
	if row["name"] != "nightly" || row["spec"] != "0 0 3 * * *" || row["queue"] != "low" ||
		row["max_retry"] != 2.0 || row["exclusive"] != true || row["last_tick"] != nil || row["next_tick"] == nil {
		t.Errorf("cron ls row = %v", row)
	}
	if r := jobs(t, p, "", "cron", "ls"); !strings.Contains(r.stdout, "nightly") || !strings.Contains(r.stdout, "NEXT TICK") {
		t.Errorf("cron ls = %q", r.stdout)
	}
	if r := jobs(t, p, "", "cron", "rm", "nightly"); r.code != 0 {
		t.Errorf("cron rm = %+v", r)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cron", "rm", "nightly"}, 1, "no cron entry"},
		{[]string{"cron", "add", "x", "61 * * * * *", "t"}, 2, "cron spec"},
		{[]string{"cron", "add", "x", "0", "0", "3", "*", "*", "*", "t"}, 2, "quote SPEC"},
		{[]string{"cron", "add", "x"}, 2, "NAME SPEC TYPE"},
		{[]string{"cron", "add", "--max-retry", "-1", "x", "@hourly", "t"}, 2, "negative"},
		{[]string{"cron", "add", "x", "@hourly", "a\x01b"}, 2, "control characters"},
		{[]string{"cron", "add", "x", "0 0 30 2 *", "t"}, 2, "never fires"},
		{[]string{"cron", "add", "--nope", "x", "@hourly", "t"}, 2, "unknown flag --nope"},
		{[]string{"scheduler", "--cron", "x @hourly"}, 2, "NAME SPEC TYPE"},
		{[]string{"ls", "default", "--state", "finished"}, 2, "state"},
		{[]string{"ls", "nosuchqueue"}, 1, "no queue"},
		{[]string{"ls"}, 2, "one queue"},
	} {
		r := jobs(t, p, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("jobs %v = exit %d, stderr %q; want %d mentioning %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

func TestLs(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	a := strings.TrimSpace(jobs(t, p, "", "enqueue", "t", "1").stdout)
	b := strings.TrimSpace(jobs(t, p, "", "enqueue", "t", "2").stdout)
	r := jobs(t, p, "", "ls", "default", "--json")
	var got []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 2 || got[0]["id"] != a || got[1]["id"] != b {
		t.Fatalf("ls --json = %q, %v; want [%s %s]", r.stdout, err, a, b)
	}
	if got[0]["state"] != "ready" || got[0]["payload"] != "1" {
		t.Errorf("ls --json object = %v", got[0])
	}
	if r := jobs(t, p, "", "ls", "default", "--offset", "1", "--limit", "5"); !strings.Contains(r.stdout, b) || strings.Contains(r.stdout, a) {
		t.Errorf("ls --offset 1 = %q", r.stdout)
	}
	if r := jobs(t, p, "", "ls", "default", "--state", "dead", "--json"); r.stdout != "[]\n" {
		t.Errorf("ls empty state = %q, want []", r.stdout)
	}
}

// TestSchedulerProcessesFireEachTickOnce runs three `jobs scheduler` processes on a
// 1-second entry, SIGKILLs one mid-run, and counts exactly one job per elapsed tick.
func TestSchedulerProcessesFireEachTickOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes for ~6s")
	}
	t.Parallel()
	p := redistest.Prefix(t)
	var started []*procHandle
	for range 3 {
		cmd, out := watchedProcess(t, p, "scheduler", "--log-level", "info", "--cron", "tick '@every 1s' t")
		started = append(started, &procHandle{cmd: cmd, out: out})
	}
	// Every tick from the one after all three run must be fired once: wait for them to
	// start rather than guess how long a loaded machine takes.
	waitFor(t, 20*time.Second, "three schedulers started", func() bool {
		for _, h := range started {
			if !strings.Contains(h.out.String(), "scheduler started") {
				return false
			}
		}
		return true
	})
	from := time.Now().Unix() + 1
	time.Sleep(2500 * time.Millisecond)
	started[0].cmd.Process.Kill()
	started[0].cmd.Wait()
	time.Sleep(2500 * time.Millisecond)
	to := time.Now().Unix() - 1
	for _, h := range started[1:] {
		h.cmd.Process.Signal(syscall.SIGTERM)
		if err := h.cmd.Wait(); err != nil {
			t.Errorf("scheduler after SIGTERM: %v\n%s", err, h.out)
		}
	}
	client, _ := queue.NewClient(redistest.Client(t), queue.Config{Prefix: p})
	for tick := from; tick <= to; tick++ {
		if _, err := client.Get(context.Background(), queue.DefaultQueue, cron.JobID("tick", time.Unix(tick, 0))); err != nil {
			t.Errorf("tick %d: %v", tick, err)
		}
	}
	all, _ := client.List(context.Background(), queue.DefaultQueue, queue.StateReady, 0, 1000)
	seen := map[string]bool{}
	for _, j := range all {
		if seen[j.ID] {
			t.Errorf("job %s twice", j.ID)
		}
		seen[j.ID] = true
	}
	if n := int64(len(all)); n < to-from+1 || n > to-from+5 {
		t.Errorf("%d jobs for the %d ticks in [%d, %d] (plus up to 4 at the edges)", n, to-from+1, from, to)
	}
	t.Logf("3 schedulers, one SIGKILLed: %d jobs, ticks %d..%d all present once", len(all), from, to)
}

type procHandle struct {
	cmd *exec.Cmd
	out *lockedBuffer
}

// TestCronAddOnFullRedis: `cron add` on a Redis at maxmemory with noeviction says in one
// line that Redis is out of memory, not Redis's raw EXECABORT.
func TestCronAddOnFullRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a redis-server to its maxmemory")
	}
	t.Parallel()
	srv := redistest.Own(t, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	value := strings.Repeat("v", 10_000)
	for i := 0; ; i++ {
		if err := rdb.Set(ctx, fmt.Sprintf("%s:fill:%d", prefix, i), value, 0).Err(); err != nil {
			if !redis.IsOOMError(err) {
				t.Fatalf("filling Redis stopped on %v, want Redis's OOM refusal", err)
			}
			break
		}
		if i > 10_000 {
			t.Fatal("100 MB written into 2mb: maxmemory is not enforced")
		}
	}
	r := runCLI("", "--redis", "redis://"+srv.Addr, "--prefix", prefix, "cron", "add", "nightly", "0 0 3 * * *", "report")
	if r.code != exitError || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "out of memory") ||
		strings.Contains(r.stderr, "EXECABORT") {
		t.Errorf("cron add on a full Redis = %+v; want exit 1 and one line saying Redis is out of memory", r)
	}
}

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// jobs stats --history prints what workers recorded; a bad span is a one-line usage error.
func TestStatsHistory(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	rdb := redistest.Client(t)
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: p})
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, "resize", nil, queue.On("images")); err != nil {
		t.Fatal(err)
	}
	now := rdb.Time(ctx).Val()
	s := &proto.MetricsSample{Queue: "images", Type: "resize", Minute: now.UnixMilli() / 60_000, Processed: 7, Failed: 2}
	s.Run[proto.HistBucket(50*time.Millisecond)] = 7
	s.Wait[proto.HistBucket(3*time.Millisecond)] = 7
	if _, err := broker.Of(client).RecordMetrics(ctx, []*proto.MetricsSample{s}); err != nil {
		t.Fatal(err)
	}

	r := jobs(t, p, "", "stats", "--history", "1h", "--json")
	if r.code != 0 {
		t.Fatalf("stats --history 1h --json = %+v", r)
	}
	var out struct {
		Queues []struct {
			Name   string  `json:"name"`
			StepS  float64 `json:"step_s"`
			Points []struct {
				Start     time.Time `json:"start"`
				Processed int64     `json:"processed"`
				Failed    int64     `json:"failed"`
				RunP95    float64   `json:"run_p95_ms"`
				Types     map[string]struct {
					Processed int64 `json:"processed"`
				} `json:"types"`
			} `json:"points"`
			Total struct {
				Processed int64 `json:"processed"`
			} `json:"total"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("stats --history --json: %v\n%s", err, r.stdout)
	}
	if len(out.Queues) != 1 || out.Queues[0].Name != "images" || out.Queues[0].StepS != 60 || len(out.Queues[0].Points) != 60 {
		t.Fatalf("stats --history 1h --json = %s, want queue images, 60 points of 60s", r.stdout)
	}
	last := out.Queues[0].Points[59]
	if last.Processed != 7 || last.Failed != 2 || last.RunP95 != 64 || last.Types["resize"].Processed != 7 || out.Queues[0].Total.Processed != 7 {
		t.Errorf("last point = %+v, total %+v; want 7 processed, 2 failed, run p95 64ms, 7 of type resize", last, out.Queues[0].Total)
	}

	r = jobs(t, p, "", "stats", "--history", "7d", "--queue", "images")
	if r.code != 0 || !strings.Contains(r.stdout, "queue images, per hour") || !strings.Contains(r.stdout, "job types: resize") ||
		strings.Count(r.stdout, "\n") != 2+168+1 {
		t.Errorf("stats --history 7d = %+v, want a title, a header, 168 hours and a total", r)
	}
	if !strings.Contains(r.stdout, "64ms") {
		t.Errorf("stats --history 7d shows no run p95 of 64ms:\n%s", r.stdout)
	}

	for _, args := range [][]string{
		{"stats", "--history", "2h"},
		{"stats", "--history", ""},
		{"stats", "--queue", "images"},
		{"stats", "--history", "1h", "--watch"},
	} {
		r := jobs(t, p, "", args...)
		if r.code != 2 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("jobs %v = exit %d, stderr %q; want exit 2 with one line", args, r.code, r.stderr)
		}
	}
}

// jobs inspect shows a running job's progress, in text and JSON.
func TestInspectShowsProgress(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	client, _ := queue.NewClient(redistest.Client(t), queue.Config{Prefix: p})
	ctx := context.Background()
	id, err := client.Enqueue(ctx, "import", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := jobs(t, p, "", "inspect", "--json", id); !strings.Contains(r.stdout, `"progress":null,"progress_msg":"","progress_at":null`) {
		t.Errorf("inspect --json before any progress = %s, want progress null", r.stdout)
	}
	b := broker.Of(client)
	claimed, err := b.Claim(ctx, "default", 1, time.Minute, "w")
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim() = %v, %v", claimed, err)
	}
	if _, _, err := b.HeartbeatProgress(ctx, "default", time.Minute, claimed, []*proto.Progress{{Percent: 42, Message: "rows 420/1000"}}); err != nil {
		t.Fatal(err)
	}
	r := jobs(t, p, "", "inspect", id)
	if !strings.Contains(r.stdout, "progress    42% rows 420/1000 (at 20") {
		t.Errorf("inspect = %s, want progress 42%% rows 420/1000 and its time", r.stdout)
	}
	r = jobs(t, p, "", "inspect", "--json", id)
	var j struct {
		Progress   *int       `json:"progress"`
		Msg        string     `json:"progress_msg"`
		ProgressAt *time.Time `json:"progress_at"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.Progress == nil || *j.Progress != 42 ||
		j.Msg != "rows 420/1000" || j.ProgressAt == nil || time.Since(*j.ProgressAt) > time.Minute {
		t.Errorf("inspect --json = %s, %v; want progress 42, its message and time", r.stdout, err)
	}
}

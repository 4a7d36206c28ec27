package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// lockedBuffer is an io.Writer that slot goroutines and the loop may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Every log record about one job carries its id, type, queue and attempt, whatever the
// outcome: done, failed (retry, then dead), snoozed, panicked.
func TestJobLogRecordsCarryTheJob(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var out lockedBuffer
	mux := NewMux()
	mux.HandleFunc("ok", func(ctx context.Context, j *queue.Job) error { return nil })
	mux.HandleFunc("fails", func(ctx context.Context, j *queue.Job) error { return errors.New("upstream 500") })
	mux.HandleFunc("panics", func(ctx context.Context, j *queue.Job) error { panic("nil map") })
	mux.HandleFunc("snoozes", func(ctx context.Context, j *queue.Job) error {
		if j.Postponed == 0 {
			return Snooze(time.Millisecond)
		}
		return nil
	})
	stop := startWorker(t, c, Config{Handler: mux,
		Logger: slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	want := map[string][]string{ // job type -> the records its job must have
		"ok":      {"job done"},
		"fails":   {"job failed", "job failed"},
		"panics":  {"job failed"},
		"snoozes": {"job snoozed", "job done"},
	}
	ids := map[string]string{}
	for typ := range want {
		ids[enqueue(t, c, typ, "", queue.MaxRetry(1))] = typ
	}
	for id, typ := range ids {
		state := queue.StateDone
		if typ == "fails" || typ == "panics" {
			state = queue.StateDead
		}
		waitState(t, c, "default", id, state, 10*time.Second)
	}
	stop() // every record is written before Run returns

	out.mu.Lock()
	defer out.mu.Unlock()
	seen := map[string][]string{}
	dec := json.NewDecoder(&out.buf)
	for {
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			break
		}
		id, ok := r[attrJobID].(string)
		if !ok {
			if _, typed := r[attrJobType]; typed && r["msg"] != "no handler for a job type here: postponing its jobs for a worker that has one" {
				t.Errorf("record names a job type but no job id: %v", r)
			}
			continue
		}
		typ := ids[id]
		if r[attrJobType] != typ || r[attrQueue] != "default" || r[attrAttempt] == nil {
			t.Errorf("record about job %s (%s) = %v; want job_type, queue and attempt too", id, typ, r)
		}
		seen[typ] = append(seen[typ], r["msg"].(string))
	}
	for typ, msgs := range want {
		for _, m := range msgs {
			found := false
			for i, s := range seen[typ] {
				if s == m {
					seen[typ] = append(seen[typ][:i], seen[typ][i+1:]...)
					found = true
					break
				}
			}
			if !found {
				t.Errorf("job of type %s: no %q record with its attributes (left: %q)", typ, m, seen[typ])
			}
		}
	}
}

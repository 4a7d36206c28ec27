package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// A workflow across queues (on the cluster pass, across slots and nodes) run by one
// worker: each dependent starts after its dependencies, reads their results, and the
// batch's callback runs once, all delivered by the worker's outbox upkeep.
func TestWorkflowAcrossQueuesRunsInOrder(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var mu sync.Mutex
	var order []string
	got := map[string]string{}
	handler := HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		order = append(order, j.Type)
		mu.Unlock()
		if len(j.After) > 0 {
			deps, err := c.Dependencies(ctx, j)
			if err != nil {
				return err
			}
			for _, d := range deps {
				mu.Lock()
				got[j.Type+"<-"+d.ID] = string(d.Result)
				mu.Unlock()
			}
		}
		SetResult(ctx, []byte("from-"+j.Type))
		return nil
	})
	startWorker(t, c, Config{Handler: handler, Concurrency: 4, Queues: map[string]int{"a": 1, "b": 1, "c": 1}})
	res, err := c.EnqueueBatch(ctx, queue.Chain(
		queue.BatchJob{Type: "fetch", Options: []queue.Option{queue.On("a")}},
		queue.BatchJob{Type: "transform", Options: []queue.Option{queue.On("b")}},
		queue.BatchJob{Type: "notify", Options: []queue.Option{queue.On("c")}}))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "c", res[2].ID, queue.StateDone, 10*time.Second)
	mu.Lock()
	if fmt.Sprint(order) != "[fetch transform notify]" || got["notify<-"+res[1].ID] != "from-transform" {
		t.Errorf("order %v, results seen %v", order, got)
	}
	mu.Unlock()

	jobs := make([]queue.BatchJob, 50)
	for i := range jobs {
		jobs[i] = queue.BatchJob{Type: "child", Options: []queue.Option{queue.On([]string{"a", "b"}[i%2])}}
	}
	ref, _, err := c.NewBatch(ctx, queue.BatchOptions{Queue: "c", OnSuccess: &queue.Callback{Type: "report"}}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, "c", ref.ID+".success", queue.StateDone, 10*time.Second)
	st, err := c.BatchStatus(ctx, ref)
	if err != nil || st.State != queue.BatchSucceeded || st.Done != 50 {
		t.Errorf("BatchStatus() = %+v, %v", st, err)
	}
}

// An exec handler of a workflow job gets its dependencies and their results in its
// environment, and its batch.
func TestExecGetsItsDependenciesResults(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	mux := NewMux()
	h, err := NewExec(`sh -c 'printf "%s|%s|%s" "$JOB_AFTER" "$JOB_DEPENDENCIES" "$JOB_BATCH"'`)
	if err != nil {
		t.Fatal(err)
	}
	h.Client = c
	mux.Handle("sh", h)
	mux.HandleFunc("bin", func(ctx context.Context, j *queue.Job) error {
		SetResult(ctx, []byte{0xff, 0x00})
		return nil
	})
	startWorker(t, c, Config{Handler: mux, Queues: map[string]int{"default": 1, "o": 1}})
	res, err := c.EnqueueBatch(ctx, []queue.BatchJob{
		{Type: "sh", Options: []queue.Option{queue.ID("first"), queue.On("o")}},
		{Type: "bin", Options: []queue.Option{queue.ID("second")}},
		{Type: "sh", Options: []queue.Option{queue.AfterJob("o", "first"), queue.After("second")}}})
	if err != nil {
		t.Fatal(err)
	}
	j := waitState(t, c, "default", res[2].ID, queue.StateDone, 10*time.Second)
	want := `o/first default/second|[{"queue":"o","id":"first","state":"done","result":"||"},` +
		`{"queue":"default","id":"second","state":"done","result_base64":"/wA="}]|`
	if string(j.Result) != want {
		t.Errorf("exec env:\n got %s\nwant %s", j.Result, want)
	}
	ref, _, err := c.NewBatch(ctx, queue.BatchOptions{ID: "b1"}, []queue.BatchJob{{Type: "sh"}})
	if err != nil {
		t.Fatal(err)
	}
	if j := waitState(t, c, "default", ref.ID+".0", queue.StateDone, 10*time.Second); string(j.Result) != "||default/b1" {
		t.Errorf("exec env of a batch child = %q, want JOB_BATCH default/b1", j.Result)
	}
}

// A chain S1 -> S2 -> S3 that died (S1 failed, S2 and S3 died of it), retried with
// RetryAllDead while a worker runs with room for all three: each step starts only after
// the one before ended, as on its first run.
func TestWorkflowChainRetriedWithRetryAllDeadRunsInOrder(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var mu sync.Mutex
	var fixed bool
	var spans []string
	handler := HandlerFunc(func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		ok := fixed
		if ok {
			spans = append(spans, "start "+j.Type)
		}
		mu.Unlock()
		if !ok {
			return fmt.Errorf("not yet")
		}
		time.Sleep(20 * time.Millisecond) // room for a step started too early to overlap
		mu.Lock()
		spans = append(spans, "end "+j.Type)
		mu.Unlock()
		return nil
	})
	res, err := c.EnqueueBatch(ctx, queue.Chain(
		queue.BatchJob{Type: "S1", Options: []queue.Option{queue.On("rc"), queue.MaxRetry(0)}},
		queue.BatchJob{Type: "S2", Options: []queue.Option{queue.On("rc"), queue.MaxRetry(0)}},
		queue.BatchJob{Type: "S3", Options: []queue.Option{queue.On("rc"), queue.MaxRetry(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, c, Config{Handler: handler, Concurrency: 4, Queues: map[string]int{"rc": 1}})
	waitState(t, c, "rc", res[2].ID, queue.StateDead, 10*time.Second)
	mu.Lock()
	fixed = true
	mu.Unlock()
	if n, err := c.RetryAllDead(ctx, "rc"); n != 3 || err != nil {
		t.Fatalf("RetryAllDead() = %d, %v; want 3", n, err)
	}
	waitState(t, c, "rc", res[2].ID, queue.StateDone, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(spans); got != "[start S1 end S1 start S2 end S2 start S3 end S3]" {
		t.Errorf("runs after the retry: %s; want each step after the one before", got)
	}
}

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

package queue_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// runUntil runs a worker with mux on queues until job q/id has ended.
func runUntil(client *queue.Client, mux *worker.Mux, q, id string, queues ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	weights := map[string]int{}
	for _, name := range queues {
		weights[name] = 1
	}
	w, err := worker.New(client, worker.Config{Handler: mux, Queues: weights,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for ctx.Err() == nil {
		if j, err := client.Get(ctx, q, id); err == nil && (j.State == queue.StateDone || j.State == queue.StateDead) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}

func ExampleAfter() {
	ctx := context.Background()
	client, err := queue.NewClient(exampleRedis(), queue.Config{Prefix: "example-after"})
	if err != nil {
		panic(err)
	}
	charge, _ := client.Enqueue(ctx, "charge", []byte(`{"order":42}`))
	// ship waits (state waiting) until charge is done; had charge died, ship would die
	// too ("dependency default/... died"), unless queue.IgnoreDependencyFailure().
	ship, _ := client.Enqueue(ctx, "ship", []byte(`{"order":42}`), queue.After(charge))
	j, _ := client.Get(ctx, "default", ship)
	fmt.Println("ship is", j.State)

	mux := worker.NewMux()
	mux.HandleFunc("charge", func(ctx context.Context, j *queue.Job) error {
		worker.SetResult(ctx, []byte("receipt-7"))
		return nil
	})
	mux.HandleFunc("ship", func(ctx context.Context, j *queue.Job) error {
		deps, err := client.Dependencies(ctx, j) // the dependencies' states and results
		if err != nil {
			return err
		}
		fmt.Println("shipping with", string(deps[0].Result))
		return nil
	})
	runUntil(client, mux, "default", ship, "default")
	// Output:
	// ship is waiting
	// shipping with receipt-7
}

func ExampleChain() {
	ctx := context.Background()
	client, err := queue.NewClient(exampleRedis(), queue.Config{Prefix: "example-chain"})
	if err != nil {
		panic(err)
	}
	// Each step waits for the one before; steps may be on any queues (any cluster slots).
	res, err := client.EnqueueBatch(ctx, queue.Chain(
		queue.BatchJob{Type: "fetch"},
		queue.BatchJob{Type: "transform", Options: []queue.Option{queue.On("cpu")}},
		queue.BatchJob{Type: "notify"}))
	if err != nil {
		panic(err)
	}
	mux := worker.NewMux()
	for _, typ := range []string{"fetch", "transform", "notify"} {
		mux.HandleFunc(typ, func(ctx context.Context, j *queue.Job) error {
			fmt.Println(j.Type)
			return nil
		})
	}
	runUntil(client, mux, "default", res[2].ID, "default", "cpu")
	// Output:
	// fetch
	// transform
	// notify
}

func ExampleClient_NewBatch() {
	ctx := context.Background()
	client, err := queue.NewClient(exampleRedis(), queue.Config{Prefix: "example-batch"})
	if err != nil {
		panic(err)
	}
	rows := make([]queue.BatchJob, 100)
	for i := range rows {
		rows[i] = queue.BatchJob{Type: "import:row", Payload: fmt.Appendf(nil, "%d", i)}
	}
	// One report once every row is imported: the callback is a job, enqueued exactly once.
	batch, _, err := client.NewBatch(ctx, queue.BatchOptions{ID: "import-2026-12-06",
		OnSuccess: &queue.Callback{Type: "import:report"}}, rows)
	if err != nil {
		panic(err)
	}
	mux := worker.NewMux()
	mux.HandleFunc("import:row", func(ctx context.Context, j *queue.Job) error { return nil })
	mux.HandleFunc("import:report", func(ctx context.Context, j *queue.Job) error {
		fmt.Printf("report: %s\n", j.Payload) // the batch's counts, as JSON
		return nil
	})
	runUntil(client, mux, "default", batch.ID+".success", "default")
	st, _ := client.BatchStatus(ctx, batch)
	fmt.Println(st.State, st.Total, st.Done, st.Pending)
	// Output:
	// report: {"batch":"import-2026-12-06","queue":"default","event":"success","total":100,"done":100,"dead":0}
	// succeeded 100 100 0
}

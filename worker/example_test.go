package worker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

func ExampleMux() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()}) // your Redis
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: "example-mux"})

	done := make(chan string)
	mux := worker.NewMux()
	mux.HandleFunc("email:welcome", func(ctx context.Context, job *queue.Job) error {
		// ... send the email; return an error to retry with backoff ...
		worker.SetResult(ctx, []byte("sent"))
		done <- string(job.Payload)
		return nil
	})
	mux.HandleFunc("import", func(ctx context.Context, job *queue.Job) error {
		return worker.SkipRetry(errors.New("malformed file")) // dead at once, no retries
	})
	w, err := worker.New(client, worker.Config{Handler: mux, Concurrency: 20})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- w.Run(ctx) }() // blocks until ctx is cancelled

	id, _ := client.Enqueue(ctx, "email:welcome", []byte(`{"user":42}`))
	fmt.Println("handled", <-done)
	stop() // graceful: running jobs finish, then Run returns nil
	fmt.Println("Run:", <-stopped)
	job, _ := client.Get(context.Background(), queue.DefaultQueue, id)
	fmt.Println(job.State, string(job.Result))
	// Output:
	// handled {"user":42}
	// Run: <nil>
	// done sent
}

func ExampleProgress() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()}) // your Redis
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: "example-progress"})

	mux := worker.NewMux()
	mux.HandleFunc("import", func(ctx context.Context, job *queue.Job) error {
		for part := 1; part <= 3; part++ {
			// ... import a third of the rows ...
			worker.Progress(ctx, part*100/3, fmt.Sprintf("%d of 3 parts", part)) // never blocks
		}
		return nil
	})
	w, err := worker.New(client, worker.Config{Handler: mux})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- w.Run(ctx) }()

	id, _ := client.Enqueue(ctx, "import", nil)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		// jobs inspect shows the same; while the job runs, within about a second.
		job, err := client.Get(ctx, queue.DefaultQueue, id)
		if err == nil && job.State == queue.StateDone {
			fmt.Printf("%s %d%% %s\n", job.State, job.Progress, job.ProgressMessage)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-stopped // a stopping worker flushes its metrics history
	h, _ := client.History(context.Background(), queue.DefaultQueue, time.Hour)
	fmt.Println("processed in the last hour:", h.Total.Processed)
	// Output:
	// done 100% 3 of 3 parts
	// processed in the last hour: 1
}

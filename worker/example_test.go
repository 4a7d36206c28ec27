package worker_test

import (
	"context"
	"errors"
	"fmt"

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

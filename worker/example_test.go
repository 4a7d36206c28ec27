package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

func ExampleMux() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true}) // your Redis
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

// Resize is a typed job: its JSON is the payload, Kind its job type.
type Resize struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

func (Resize) Kind() string { return "image:resize" }

func ExampleHandleArgs() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true}) // your Redis
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: "example-handleargs"})

	done := make(chan Resize)
	mux := worker.NewMux()
	worker.HandleArgs(mux, func(ctx context.Context, job *queue.Job, r Resize) error {
		done <- r // decoded: a payload that does not decode dies at once, unrun
		return nil
	})
	w, _ := worker.New(client, worker.Config{Handler: mux})
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- w.Run(ctx) }()

	client.EnqueueArgs(ctx, Resize{URL: "https://example.com/cat.png", Width: 640})
	fmt.Printf("%+v\n", <-done)
	stop()
	<-stopped
	// Output: {URL:https://example.com/cat.png Width:640}
}

func ExampleMux_Use() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true}) // your Redis
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: "example-use"})

	type tenantKey struct{}
	mux := worker.NewMux()
	// Every job runs inside the middleware: here it finds the tenant in the job's ID
	// prefix and puts it in the context the handler gets.
	mux.Use(func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			tenant, _, _ := strings.Cut(job.ID, "-")
			return next.Process(context.WithValue(ctx, tenantKey{}, tenant), job)
		})
	})
	done := make(chan string)
	mux.HandleFunc("invoice", func(ctx context.Context, job *queue.Job) error {
		done <- fmt.Sprintf("invoice %s for tenant %v", job.Payload, ctx.Value(tenantKey{}))
		return nil
	})
	w, _ := worker.New(client, worker.Config{Handler: mux})
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- w.Run(ctx) }()

	client.Enqueue(ctx, "invoice", []byte("2026-12"), queue.ID("acme-inv-7"))
	fmt.Println(<-done)
	stop()
	<-stopped
	// Output: invoice 2026-12 for tenant acme
}

func ExampleSnooze() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true}) // your Redis
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: "example-snooze"})

	done := make(chan *queue.Job)
	busy := true // say, a partner API answered 429 the first time
	w, _ := worker.New(client, worker.Config{Handler: worker.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
		if busy {
			busy = false
			return worker.Snooze(10 * time.Millisecond) // again later; the attempt is not counted
		}
		done <- job
		return nil
	})})
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- w.Run(ctx) }()

	client.Enqueue(ctx, "sync", nil)
	job := <-done
	fmt.Println("attempt", job.Attempt, "postponed", job.Postponed)
	stop()
	<-stopped
	// Output: attempt 1 postponed 1
}

func ExampleConfig_onError() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true}) // your Redis
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: "example-onerror"})

	dead := make(chan string)
	w, _ := worker.New(client, worker.Config{
		Handler: worker.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			panic("nil map")
		}),
		OnError: func(job *queue.Job, err error) {
			var p *worker.PanicError
			if errors.As(err, &p) { // p.Stack holds the handler's stack
				fmt.Println("attempt", job.Attempt, "panicked:", p.Value, "- now", job.State)
			}
		},
		OnDead: func(job *queue.Job, err error) { dead <- job.ID }, // page someone
	})
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- w.Run(ctx) }()

	id, _ := client.Enqueue(ctx, "import", nil, queue.MaxRetry(0))
	fmt.Println("dead:", <-dead == id)
	stop()
	<-stopped
	// Output:
	// attempt 1 panicked: nil map - now dead
	// dead: true
}

func ExampleProgress() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true}) // your Redis
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

func ExampleConfig_types() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true}) // your Redis
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: "example-types"})

	dead := make(chan *queue.Job)
	w, _ := worker.New(client, worker.Config{
		Handler: worker.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			deadline, _ := ctx.Deadline()
			fmt.Printf("attempt %d, deadline in about %s\n", job.Attempt, time.Until(deadline).Round(time.Hour))
			return errors.New("warehouse offline")
		}),
		// Policies per job type, decided by the handler's author whatever the enqueuer set:
		// reports may run 2 hours, are retried once, 10ms after a failure.
		Types: map[string]worker.TypePolicy{"report": {
			Timeout:  2 * time.Hour,
			MaxRetry: 1,
			Backoff:  func(*queue.Job, error) time.Duration { return 10 * time.Millisecond },
		}},
		OnDead: func(job *queue.Job, err error) { dead <- job },
	})
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- w.Run(ctx) }()

	client.Enqueue(ctx, "report", nil, queue.MaxRetry(10)) // the type's MaxRetry bounds it
	job := <-dead
	fmt.Println("dead after attempt", job.Attempt)
	stop()
	<-stopped
	// Output:
	// attempt 1, deadline in about 2h0m0s
	// attempt 2, deadline in about 2h0m0s
	// dead after attempt 2
}

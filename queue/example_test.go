package queue_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// exampleRedis is the test server; in an application this is your Redis.
func exampleRedis() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true})
}

func ExampleClient_Enqueue() {
	ctx := context.Background()
	rdb := exampleRedis() // redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	client, err := queue.NewClient(rdb, queue.Config{Prefix: "example-enqueue"})
	if err != nil {
		panic(err)
	}
	id, err := client.Enqueue(ctx, "email:welcome", []byte(`{"user":42}`),
		queue.On("emails"), queue.Delay(time.Minute), queue.MaxRetry(5))
	if err != nil {
		panic(err)
	}
	job, _ := client.Get(ctx, "emails", id)
	fmt.Println(job.Type, job.State, job.MaxRetry)

	// An explicit ID is a dedup key.
	_, err = client.Enqueue(ctx, "charge", nil, queue.ID("order-42"))
	_, err2 := client.Enqueue(ctx, "charge", nil, queue.ID("order-42"))
	fmt.Println(err, errors.Is(err2, queue.ErrDuplicate))
	// Output:
	// email:welcome scheduled 5
	// <nil> true
}

func ExampleClient_Events() {
	ctx := context.Background()
	client, err := queue.NewClient(exampleRedis(), queue.Config{Prefix: "example-events"})
	if err != nil {
		panic(err)
	}
	id, _ := client.Enqueue(ctx, "report", nil)
	_, _ = client.Cancel(ctx, "default", id)

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// "0": every event the stream still holds; "" for new ones only; an event's Cursor
	// to resume after it.
	n := 0
	for ev, err := range client.Events(ctx, []string{"default"}, "0") {
		if err != nil { // ctx's error, a Redis error, or a *GapError (errors.Is ErrEventsGap)
			fmt.Println(err)
			break
		}
		fmt.Println(ev.Name, ev.Type, ev.ID == id)
		if n++; n == 2 {
			break
		}
	}
	// Output:
	// enqueued report true
	// cancelled report true
}

// A follower that must see every event survives Redis failing (a restart, a lost
// connection: Events then ends with a Redis error) by calling Events again from the
// cursor of the last event it handled, after a pause that grows while Redis stays away.
func ExampleClient_Events_resume() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client, err := queue.NewClient(exampleRedis(), queue.Config{Prefix: "example-events-resume"})
	if err != nil {
		panic(err)
	}
	for _, typ := range []string{"a", "b", "c"} {
		_, _ = client.Enqueue(ctx, typ, nil)
	}

	cursor := "0" // a real follower stores it with what it did of each event
	pause := 100 * time.Millisecond
	for handled := 0; handled < 3; {
		var failed error
		for ev, err := range client.Events(ctx, nil, cursor) {
			var gap *queue.GapError
			if errors.As(err, &gap) {
				// Redis trimmed events before they were read: they are lost. Say so,
				// and go on with what the streams hold (or stop: the caller's choice).
				fmt.Println("lost events:", gap)
				cursor = gap.Resume
				break
			}
			if err != nil {
				failed = err
				break
			}
			fmt.Println(ev.Name, ev.Type)
			cursor, pause = ev.Cursor, 100*time.Millisecond
			if handled++; handled == 3 {
				break
			}
		}
		if ctx.Err() != nil {
			break // ctx ended: the follower stops
		}
		if failed != nil {
			time.Sleep(pause) // Redis failed: try again from cursor
			pause = min(2*pause, 5*time.Second)
		}
	}
	// Output:
	// enqueued a
	// enqueued b
	// enqueued c
}

func ExampleClient_Wait() {
	ctx := context.Background()
	client, err := queue.NewClient(exampleRedis(), queue.Config{Prefix: "example-wait"})
	if err != nil {
		panic(err)
	}
	id, _ := client.Enqueue(ctx, "report", nil)
	_, _ = client.Cancel(ctx, "default", id)

	// Wait returns when the job is done or dead: here at once, it is dead already.
	job, err := client.Wait(ctx, "default", id)
	fmt.Println(job.State, job.LastError, err)
	// Output:
	// dead cancelled by operator <nil>
}

// Welcome is a typed job: its JSON is the payload, Kind its job type.
type Welcome struct {
	UserID int `json:"user_id"`
}

func (Welcome) Kind() string { return "email:welcome" }

// JobOptions gives every Welcome job its queue and retries, declared once.
func (Welcome) JobOptions() []queue.Option {
	return []queue.Option{queue.On("email"), queue.MaxRetry(5)}
}

func ExampleClient_EnqueueArgs() {
	client, _ := queue.NewClient(exampleRedis(), queue.Config{Prefix: "example-args"})
	ctx := context.Background()
	id, err := client.EnqueueArgs(ctx, Welcome{UserID: 42}, queue.Delay(time.Minute))
	if err != nil {
		panic(err)
	}
	job, _ := client.Get(ctx, "email", id)
	fmt.Println(job.Type, string(job.Payload), job.MaxRetry, job.State)
	// Output: email:welcome {"user_id":42} 5 scheduled
}

// A worker or scheduler is listed while it runs; an operator can quiet or stop it from
// anywhere, and it obeys at its next beat.
func ExampleClient_Processes() {
	ctx := context.Background()
	client, err := queue.NewClient(exampleRedis(), queue.Config{Prefix: "example-processes"})
	if err != nil {
		panic(err)
	}
	mux := worker.NewMux()
	mux.HandleFunc("email:welcome", func(context.Context, *queue.Job) error { return nil })
	w, err := worker.New(client, worker.Config{Handler: mux, ID: "web-1", Beat: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()

	procs, err := client.Processes(ctx)
	for err == nil && len(procs) == 0 { // listed within a round trip of Run
		time.Sleep(10 * time.Millisecond)
		procs, err = client.Processes(ctx)
	}
	p := procs[0]
	fmt.Println(p.ID, p.Kind, p.State, p.Types, p.Queues)

	err = client.Stop(ctx, "web-1") // like SIGTERM: Run returns nil
	fmt.Println(err, <-done)
	procs, _ = client.Processes(ctx)
	fmt.Println(len(procs))
	// Output:
	// web-1 worker running [email:welcome] map[default:1]
	// <nil> <nil>
	// 0
}

func ExampleClient_SetLimit() {
	ctx := context.Background()
	client, err := queue.NewClient(exampleRedis(), queue.Config{Prefix: "example-limit"})
	if err != nil {
		panic(err)
	}
	// At most 5 exports at once across all workers, and at most 100 starts a second,
	// up to 20 at once.
	n, period, _ := queue.ParseRate("100/s") // what `jobs limit set --rate` takes
	err = client.SetLimit(ctx, "exports", queue.Limit{Concurrency: 5, Rate: n, Period: period, Burst: 20})
	if err != nil {
		panic(err)
	}
	ls, _ := client.Limits(ctx)
	fmt.Println(ls[0].Queue, ls[0].Limit, ls[0].Running, ls[0].Waiting() == "")

	err = client.SetLimit(ctx, "exports", queue.Limit{Concurrency: 0, Rate: -1})
	fmt.Println(errors.Is(err, queue.ErrInvalid))
	_ = client.RemoveLimit(ctx, "exports", queue.RateLimit)
	ls, _ = client.Limits(ctx)
	fmt.Println(ls[0].Limit)
	// Output:
	// exports concurrency 5, rate 100/1s burst 20 0 true
	// true
	// concurrency 5
}

package cron_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

func ExampleScheduler() {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true}) // your Redis
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: "example-cron"})

	s, err := cron.New(client, cron.Config{Entries: []cron.Entry{
		// Six fields with seconds, five without, or @every / @hourly / @daily ...
		{Name: "heartbeat", Spec: "@every 1s", Type: "ping", Payload: `{"from":"cron"}`},
	}})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }() // run in as many processes as you like

	for {
		jobs, _ := client.List(context.Background(), queue.DefaultQueue, queue.StateReady, 0, 1)
		if len(jobs) > 0 {
			j := jobs[0]
			fmt.Println(j.Type, string(j.Payload), strings.HasPrefix(j.ID, "cron:heartbeat:"))
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	fmt.Println(<-done)
	// Output:
	// ping {"from":"cron"} true
	// <nil>
}

// Entry.Next gives an entry's ticks. Across a daylight-saving change each wall time fires
// once, as with system cron: on 8 March 2026 New York's clocks jump from 02:00 to 03:00,
// so the 02:30 tick comes right after the jump.
func ExampleEntry_Next() {
	e := cron.Entry{Name: "nightly", Spec: "CRON_TZ=America/New_York 30 2 * * *", Type: "report"}
	ny, _ := time.LoadLocation("America/New_York")
	t := time.Date(2026, 3, 8, 0, 0, 0, 0, ny)
	for range 2 {
		t = e.Next(t)
		fmt.Println(t.In(ny).Format("2006-01-02 15:04 MST"))
	}
	// Output:
	// 2026-03-08 03:00 EDT
	// 2026-03-09 02:30 EDT
}

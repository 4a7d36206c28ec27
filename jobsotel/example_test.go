package jobsotel_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/jobsotel"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

func Example() {
	// In an application: otel.SetTracerProvider(tp) and otel.SetTextMapPropagator(...)
	// once, and no options below.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	opts := []jobsotel.Option{jobsotel.WithTracerProvider(tp), jobsotel.WithPropagator(propagation.TraceContext{})}

	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr()}) // your Redis
	client, _ := queue.NewClient(rdb, queue.Config{Prefix: "example-otel"})

	ctx, span := tp.Tracer("web").Start(context.Background(), "POST /signup")
	client.Enqueue(ctx, "email:welcome", nil, jobsotel.Inject(ctx, opts...))
	span.End()

	done := make(chan struct{})
	mux := worker.NewMux()
	mux.Use(jobsotel.Middleware(opts...))
	mux.HandleFunc("email:welcome", func(context.Context, *queue.Job) error { close(done); return nil })
	w, _ := worker.New(client, worker.Config{Handler: mux})
	wctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- w.Run(wctx) }()
	<-done
	stop()
	<-stopped

	for _, s := range rec.Ended() {
		fmt.Println(s.Name(), len(s.Links()) == 1 && s.Links()[0].SpanContext.TraceID() == span.SpanContext().TraceID())
	}
	// Output:
	// POST /signup false
	// process email:welcome true
}

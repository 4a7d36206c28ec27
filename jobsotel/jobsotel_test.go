package jobsotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobs-dev/jobs/jobsotel"
	"github.com/jobs-dev/jobs/jobstest"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// The enqueuing span's context travels with the job; each attempt is a span linked to
// it, with the job's queue, type, attempt and outcome.
func TestAttemptSpansLinkToTheEnqueuingSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	prop := propagation.TraceContext{}
	opts := []jobsotel.Option{jobsotel.WithTracerProvider(tp), jobsotel.WithPropagator(prop)}

	c := jobstest.NewClient(t, queue.Config{})
	ctx, producer := tp.Tracer("app").Start(context.Background(), "signup")
	id, err := c.Enqueue(ctx, "email", nil, jobsotel.Inject(ctx, opts...), queue.MaxRetry(1))
	producer.End()
	if err != nil {
		t.Fatal(err)
	}
	untraced, _ := c.Enqueue(context.Background(), "email", nil, jobsotel.Inject(context.Background(), opts...))

	mux := worker.NewMux()
	mux.Use(jobsotel.Middleware(opts...))
	mux.HandleFunc("email", func(ctx context.Context, j *queue.Job) error {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			t.Error("the handler's context has no span")
		}
		if j.ID == id && j.Attempt == 1 {
			return errors.New("smtp down")
		}
		return nil
	})
	jobstest.Drain(t, c, worker.Config{Handler: mux, Concurrency: 1,
		BackoffFunc: func(*queue.Job, error) time.Duration { return time.Millisecond }})

	var attempts []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "process email" {
			attempts = append(attempts, s)
		}
	}
	if len(attempts) != 3 {
		t.Fatalf("%d attempt spans, want 3 (two for the traced job, one for the other)", len(attempts))
	}
	traced := 0
	for _, s := range attempts {
		attrs := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value
		}
		if s.SpanKind() != trace.SpanKindConsumer || attrs[jobsotel.AttrQueue].AsString() != "default" ||
			attrs[jobsotel.AttrType].AsString() != "email" {
			t.Errorf("span %s kind %s attrs %v", s.Name(), s.SpanKind(), attrs)
		}
		switch attrs[jobsotel.AttrID].AsString() {
		case id:
			traced++
			if len(s.Links()) != 1 || s.Links()[0].SpanContext.SpanID() != producer.SpanContext().SpanID() {
				t.Errorf("attempt %d links %v, want the enqueuing span", attrs[jobsotel.AttrAttempt].AsInt64(), s.Links())
			}
			failed := attrs[jobsotel.AttrAttempt].AsInt64() == 1
			if failed != (s.Status().Code == codes.Error) || failed != (attrs[jobsotel.AttrOutcome].AsString() == "failed") {
				t.Errorf("attempt %d: status %v outcome %s", attrs[jobsotel.AttrAttempt].AsInt64(), s.Status(), attrs[jobsotel.AttrOutcome].AsString())
			}
		case untraced:
			if len(s.Links()) != 0 || attrs[jobsotel.AttrOutcome].AsString() != "done" {
				t.Errorf("untraced job's span: links %v outcome %s", s.Links(), attrs[jobsotel.AttrOutcome].AsString())
			}
		}
	}
	if traced != 2 {
		t.Errorf("%d spans of the traced job, want 2", traced)
	}
}

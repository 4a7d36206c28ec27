package jobsotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// A trace context too long for a job's Meta never makes the enqueue fail: a W3C
// tracestate of 20 members (403 bytes; the spec allows 32 members of up to 256 bytes
// each) travels as its leading members that fit, and one whose only member is too long
// is left out, traceparent kept. Before, Enqueue was refused: meta "tracestate": value
// must be at most 256 bytes.
func TestInjectKeepsEnqueueWorkingWithLongTraceState(t *testing.T) {
	c := jobstest.NewClient(t, queue.Config{})
	var members []string
	for i := range 20 {
		members = append(members, fmt.Sprintf("vendor%02d=%s", i, strings.Repeat("a", 10)))
	}
	long := strings.Join(members, ",")
	for _, tc := range []struct {
		name, state string
		want        string // the tracestate meta expected; "" for none
	}{
		{"many members", long, strings.Join(members[:12], ",")},
		{"one member too long", "v=" + strings.Repeat("b", 255), ""},
		{"fits", "v=1", "v=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := trace.ParseTraceState(tc.state)
			if err != nil {
				t.Fatal(err)
			}
			sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2},
				TraceFlags: trace.FlagsSampled, TraceState: ts})
			ctx := trace.ContextWithSpanContext(context.Background(), sc)
			prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
			id, err := c.Enqueue(ctx, "traced", nil, jobsotel.Inject(ctx, jobsotel.WithPropagator(prop)))
			if err != nil {
				t.Fatalf("Enqueue with a tracestate of %d bytes: %v, want it enqueued", len(tc.state), err)
			}
			j, err := c.Get(ctx, "default", id)
			if err != nil {
				t.Fatal(err)
			}
			if got := j.Meta["tracestate"]; got != tc.want {
				t.Errorf("tracestate meta %q (%d bytes), want %q", got, len(got), tc.want)
			}
			if !strings.HasPrefix(j.Meta["traceparent"], "00-01000000000000000000000000000000-0200000000000000-01") {
				t.Errorf("traceparent meta %q, want the span's", j.Meta["traceparent"])
			}
		})
	}
}

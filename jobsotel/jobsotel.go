// Package jobsotel traces jobs with OpenTelemetry: the trace context of the code that
// enqueues a job travels with it (as the job's Meta), and each attempt runs in a span of
// its own, linked to the enqueuing span, with the job's queue, type, attempt and outcome.
// It is a package of its own so that the queue and worker packages do not depend on
// OpenTelemetry.
//
//	id, err := client.Enqueue(ctx, "email:welcome", payload, jobsotel.Inject(ctx))
//	mux.Use(jobsotel.Middleware())
//
// Both use the global TracerProvider and TextMapPropagator (otel.SetTracerProvider,
// otel.SetTextMapPropagator) unless given others.
package jobsotel

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

// ScopeName is the instrumentation scope of the spans this package makes.
const ScopeName = "github.com/jobs-dev/jobs/jobsotel"

// Attribute keys of an attempt's span.
const (
	AttrQueue   = attribute.Key("jobs.queue")
	AttrType    = attribute.Key("jobs.type")
	AttrID      = attribute.Key("jobs.id")
	AttrAttempt = attribute.Key("jobs.attempt")
	// AttrOutcome is "done", "failed", "snoozed" or "no_handler".
	AttrOutcome = attribute.Key("jobs.outcome")
)

// Option configures Inject and Middleware.
type Option func(*config)

type config struct {
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

// WithTracerProvider makes spans with tp instead of the global TracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithPropagator carries the trace context with p instead of the global propagator.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.prop = p }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
	}
	return c
}

// Inject returns an enqueue option that carries ctx's trace context with the job, as
// queue.Meta entries (for the W3C propagator: "traceparent" and, when set,
// "tracestate"). Without a span in ctx, or with a no-op propagator, it adds nothing.
//
// Tracing never makes an enqueue fail: a value longer than queue.MaxMetaValue (a W3C
// tracestate may reach 512 bytes and more, baggage 8 KiB) keeps the members of its
// comma-separated list that fit, first ones first (tracestate's own rule: members are
// dropped from the end), and a header with none that fits, or one Meta would refuse
// (a key over 64 bytes, control characters), is left out, as are headers past
// queue.MaxMeta.
func Inject(ctx context.Context, opts ...Option) queue.Option {
	c := newConfig(opts)
	carrier := propagation.MapCarrier{}
	c.prop.Inject(ctx, carrier)
	metas := make([]queue.Option, 0, len(carrier))
	for _, k := range carrier.Keys() {
		if v, ok := fit(k, carrier[k]); ok && len(metas) < queue.MaxMeta {
			metas = append(metas, queue.Meta(k, v))
		}
	}
	return queue.Combine(metas...)
}

// fit returns header k's value v as it can travel in a job's Meta: whole when it fits,
// else the leading members of its comma-separated list that fit; ok false when nothing
// of it can (see Inject).
func fit(k, v string) (string, bool) {
	if len(k) == 0 || len(k) > 64 || !plain(k) || !plain(v) {
		return "", false
	}
	for len(v) > queue.MaxMetaValue {
		i := strings.LastIndexByte(v, ',')
		if i < 0 {
			return "", false
		}
		v = strings.TrimRight(v[:i], " \t")
	}
	return v, v != ""
}

// plain reports whether s is printable ASCII, as HTTP header names and the W3C and
// baggage values are: no control character (Meta refuses tabs and newlines).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// Middleware returns worker middleware that runs each attempt in a span named
// "process <type>" (kind consumer) with the job's queue, type, ID, attempt and outcome,
// linked to the span that enqueued the job when its trace context came with it (see
// Inject). A failed attempt records its error and sets the span's status to Error.
func Middleware(opts ...Option) worker.Middleware {
	c := newConfig(opts)
	tracer := c.tp.Tracer(ScopeName)
	return func(next worker.Handler) worker.Handler {
		return worker.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
			var links []trace.Link
			if len(job.Meta) > 0 {
				producer := trace.SpanContextFromContext(c.prop.Extract(context.Background(), propagation.MapCarrier(job.Meta)))
				if producer.IsValid() {
					links = append(links, trace.Link{SpanContext: producer})
				}
			}
			ctx, span := tracer.Start(ctx, "process "+job.Type, trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithLinks(links...), trace.WithAttributes(
					AttrQueue.String(job.Queue), AttrType.String(job.Type), AttrID.String(job.ID),
					AttrAttempt.Int(job.Attempt)))
			defer span.End()
			err := next.Process(ctx, job)
			outcome := "done"
			switch {
			case err == nil:
			case errors.Is(err, worker.ErrNoHandler):
				outcome = "no_handler"
			case worker.IsSnooze(err):
				outcome = "snoozed"
			default:
				outcome = "failed"
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			span.SetAttributes(AttrOutcome.String(outcome))
			return err
		})
	}
}

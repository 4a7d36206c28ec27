// Package jobstest helps an application test its own jobs: a throwaway Redis for each
// test, assertions that the code under test enqueued what it should, and Drain, which
// runs a queue's jobs to completion inside the test with the application's handlers.
//
//	func TestSignupSendsWelcome(t *testing.T) {
//		client := jobstest.NewClient(t, queue.Config{})
//		signup(ctx, client, "ada@example.com") // the code under test enqueues
//		jobstest.RequireEnqueuedArgs(t, client, "email", Welcome{Email: "ada@example.com"})
//		jobs := jobstest.Drain(t, client, worker.Config{Handler: mux, Queues: map[string]int{"email": 1}})
//		...
//	}
package jobstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/devserver"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// NewClient returns a queue.Client on a Redis of t's own, stopped when t ends: a
// redis-server on a free loopback port when one is installed, otherwise an in-memory
// server (github.com/alicebob/miniredis, as `jobs dev` uses), which runs the same Lua
// scripts but is not Redis; t's log says which. It fails t when neither can start.
func NewClient(t testing.TB, cfg queue.Config) *queue.Client {
	t.Helper()
	var addr string
	if _, err := exec.LookPath("redis-server"); err == nil {
		srv, err := redistest.Start()
		if err != nil {
			t.Fatalf("jobstest: %v", err)
		}
		t.Cleanup(srv.Stop)
		addr = srv.Addr
		t.Logf("jobstest: redis-server on %s", addr)
	} else {
		srv, err := devserver.Start("127.0.0.1:0")
		if err != nil {
			t.Fatalf("jobstest: %v", err)
		}
		t.Cleanup(srv.Close)
		addr = srv.Addr()
		t.Logf("jobstest: no redis-server on PATH: an in-memory server (miniredis) on %s", addr)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c, err := queue.NewClient(rdb, cfg)
	if err != nil {
		t.Fatalf("jobstest: %v", err)
	}
	return c
}

// Waiting returns the jobs of type typ that wait in queue q (ready or scheduled), oldest
// first (up to 10,000 of each state).
func Waiting(t testing.TB, c *queue.Client, q, typ string) []*queue.Job {
	t.Helper()
	var out []*queue.Job
	for _, st := range []queue.State{queue.StateReady, queue.StateScheduled} {
		jobs, err := c.List(context.Background(), q, st, 0, 10_000)
		if errors.Is(err, queue.ErrNotFound) {
			return nil // no job was ever enqueued on q
		}
		if err != nil {
			t.Fatalf("jobstest: list %s jobs of %s: %v", st, q, err)
		}
		for _, j := range jobs {
			if j.Type == typ {
				out = append(out, j)
			}
		}
	}
	return out
}

// RequireEnqueued fails t unless a job of type typ with the given payload waits in queue
// q, and returns the first such job. Payloads that are both JSON compare as JSON values
// (key order and spacing do not matter); others byte for byte.
func RequireEnqueued(t testing.TB, c *queue.Client, q, typ string, payload []byte) *queue.Job {
	t.Helper()
	waiting := Waiting(t, c, q, typ)
	for _, j := range waiting {
		if samePayload(j.Payload, payload) {
			return j
		}
	}
	t.Fatalf("jobstest: no %s job with payload %s waits in queue %q (%d of that type do: %s)",
		typ, payload, q, len(waiting), payloads(waiting))
	return nil
}

// RequireEnqueuedArgs fails t unless a job of want's kind whose payload decodes to a
// value equal to want (reflect.DeepEqual) waits in queue q, and returns it.
func RequireEnqueuedArgs[T queue.Args](t testing.TB, c *queue.Client, q string, want T) *queue.Job {
	t.Helper()
	waiting := Waiting(t, c, q, want.Kind())
	for _, j := range waiting {
		var got T
		if json.Unmarshal(j.Payload, &got) == nil && reflect.DeepEqual(got, want) {
			return j
		}
	}
	t.Fatalf("jobstest: no %s job with arguments %+v waits in queue %q (%d of that kind do: %s)",
		want.Kind(), want, q, len(waiting), payloads(waiting))
	return nil
}

func samePayload(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil {
		return reflect.DeepEqual(va, vb)
	}
	return bytes.Equal(a, b)
}

// payloads lists a few jobs' payloads for a failure message.
func payloads(jobs []*queue.Job) string {
	var b bytes.Buffer
	for i, j := range jobs {
		if i == 3 {
			b.WriteString(", ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.Write(j.Payload)
	}
	return b.String()
}

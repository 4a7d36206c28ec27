package dash

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// benchFixture loads a dedicated redis-server with JOBS_DASH_BENCH_QUEUES queues (default
// 1,000) holding JOBS_DASH_BENCH_JOBS jobs in all (default 1,000,000): one job in each
// small queue, the rest in queue "big", half ready, a quarter scheduled, a quarter dead.
func benchFixture(b *testing.B) (*queue.Client, int, int) {
	b.Helper()
	nq, nj := envInt(b, "JOBS_DASH_BENCH_QUEUES", 1000), envInt(b, "JOBS_DASH_BENCH_JOBS", 1_000_000)
	srv := redistest.Own(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	b.Cleanup(func() { rdb.Close() })
	c, err := queue.NewClient(rdb, queue.Config{Events: -1, DeadMax: nj})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	var batch []queue.BatchJob
	flush := func() {
		res, err := c.EnqueueBatch(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		batch = batch[:0]
	}
	add := func(j queue.BatchJob) {
		if batch = append(batch, j); len(batch) == 1000 {
			flush()
		}
	}
	for i := range nq - 1 {
		add(queue.BatchJob{Type: "small", Payload: []byte(`{"n":1}`), Options: []queue.Option{queue.On(fmt.Sprintf("q%04d", i))}})
	}
	big := nj - (nq - 1)
	for i := range big {
		opts := []queue.Option{queue.On("big")}
		if i%4 == 1 {
			opts = append(opts, queue.Delay(time.Hour+time.Duration(i)*time.Millisecond))
		}
		add(queue.BatchJob{Type: "report", Payload: []byte(`{"user":` + strconv.Itoa(i) + `}`), Options: opts})
	}
	flush()
	// A quarter of big's jobs dead: the dead set read newest first.
	killed := 0
	for killed < big/4 {
		pipe := rdb.Pipeline()
		js, err := brokerOfClient(c).Claim(ctx, "big", 1000, time.Hour, "bench")
		if err != nil || len(js) == 0 {
			b.Fatalf("Claim() = %d, %v", len(js), err)
		}
		_ = pipe
		for _, j := range js {
			if _, err := brokerOfClient(c).Fail(ctx, j, "boom", -1); err != nil {
				b.Fatal(err)
			}
		}
		killed += len(js)
	}
	info := rdb.Info(ctx, "memory").Val()
	b.Logf("fixture: %d queues, %d jobs (big: %d, of which %d dead) loaded in %s; %s", nq, nj, big, killed,
		time.Since(start).Round(time.Second), firstMatch(info, "used_memory_human:"))
	return c, nq, nj
}

func BenchmarkPages(b *testing.B) {
	c, nq, nj := benchFixture(b)
	h, err := New(c, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	// The first overview reads the metrics history of every queue (then shared 10 s).
	t0 := time.Now()
	if w := serve(h, "/", false); w.Code != 200 {
		b.Fatalf("GET / = %d", w.Code)
	}
	b.Logf("first overview (history snapshot read): %s", time.Since(t0).Round(time.Millisecond))
	var next string
	{
		w := serve(h, "/queues/big?state=dead", true)
		next = firstMatch(w.Body.String(), `"next":"`)
	}
	for _, path := range []string{"/", "/queues/big?state=ready", "/queues/big?state=scheduled",
		"/queues/big?state=dead", "/queues/big?state=dead&cursor=" + next, "/queues/big?state=dead&error=nomatch",
		"/queues/q0500", "/queues/big/matching?state=dead&do=retry&error=nomatch"} {
		b.Run(fmt.Sprintf("%dq_%dj%s", nq, nj, path), func(b *testing.B) {
			for b.Loop() {
				if w := serve(h, path, false); w.Code != 200 {
					b.Fatalf("GET %s = %d: %s", path, w.Code, w.Body)
				}
			}
		})
	}
}

func serve(h http.Handler, path string, json bool) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	if json {
		r.Header.Set("Accept", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// firstMatch returns what follows prefix in s, up to the next quote or line end.
func firstMatch(s, prefix string) string {
	for i := 0; i+len(prefix) <= len(s); i++ {
		if s[i:i+len(prefix)] == prefix {
			j := i + len(prefix)
			k := j
			for k < len(s) && s[k] != '"' && s[k] != '\r' && s[k] != '\n' {
				k++
			}
			return s[j:k]
		}
	}
	return ""
}

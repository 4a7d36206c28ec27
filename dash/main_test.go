package dash

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/internal/proto"
	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// bundle is one test's dashboard on its own key prefix, served by httptest.
type bundle struct {
	client *queue.Client
	h      *Handler
	srv    *httptest.Server
}

func setup(t *testing.T, opts Options) *bundle {
	t.Helper()
	t.Parallel()
	rdb := redistest.Client(t)
	c, err := queue.NewClient(rdb, queue.Config{Prefix: redistest.Prefix(t)})
	if err != nil {
		t.Fatalf("NewClient() err = %v", err)
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	h, err := New(c, opts)
	if err != nil {
		t.Fatalf("New() err = %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &bundle{client: c, h: h, srv: srv}
}

// setupOwnRedis is setup over a redis-server of the test's own, which it may kill and
// restart (Redis going away under an open page).
func setupOwnRedis(t *testing.T, opts Options) (*bundle, *redistest.Server) {
	t.Helper()
	t.Parallel()
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c, err := queue.NewClient(srv.Client(t), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	h, err := New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return &bundle{client: c, h: h, srv: hs}, srv
}

// testLogger writes the dashboard's log lines to the test's log (go test -v shows them)
// until the test ends; lines logged after it (a background read finishing late) are
// dropped rather than logged to a finished test.
func testLogger(t *testing.T) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	return slog.New(slog.NewTextHandler(w, nil))
}

type testLogWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

// reply is one HTTP exchange's outcome.
type reply struct {
	status int
	header http.Header
	body   string
}

// do sends a request to the test server. form, when not nil, is sent as a POST form body
// from the server's own origin (as a browser on the page would).
func (b *bundle) do(t *testing.T, method, path string, form url.Values, hdr map[string]string) reply {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for k, v := range hdr { // an empty value removes the header
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout: 20 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(raw)}
}

func (b *bundle) get(t *testing.T, path string) reply { return b.do(t, "GET", path, nil, nil) }

func (b *bundle) getJSON(t *testing.T, path string, v any) reply {
	t.Helper()
	r := b.do(t, "GET", path, nil, map[string]string{"Accept": "application/json"})
	if r.status != http.StatusOK {
		t.Fatalf("GET %s (JSON) = %d %s, want 200", path, r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), v); err != nil {
		t.Fatalf("GET %s (JSON): %v in %s", path, err, r.body)
	}
	return r
}

func (b *bundle) post(t *testing.T, path string, form url.Values) reply {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	return b.do(t, "POST", path, form, nil)
}

func (b *bundle) enqueue(t *testing.T, typ, payload string, opts ...queue.Option) string {
	t.Helper()
	id, err := b.client.Enqueue(context.Background(), typ, []byte(payload), opts...)
	if err != nil {
		t.Fatalf("Enqueue(%q) err = %v", typ, err)
	}
	return id
}

func wantStatus(t *testing.T, what string, r reply, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("%s = %d, want %d; body: %.300s", what, r.status, want, r.body)
	}
}

// dead makes a job of type typ die with reason as its error, and returns its ID.
func (b *bundle) dead(t *testing.T, typ, payload, reason string) string {
	t.Helper()
	id := b.enqueue(t, typ, payload, queue.MaxRetry(0))
	b.claimAndFail(t, id, reason)
	return id
}

// claimAndFail claims the next ready job of default (it must be id) and fails it for good.
func (b *bundle) claimAndFail(t *testing.T, id, reason string) {
	t.Helper()
	ctx := context.Background()
	br := broker.Of(b.client)
	jobs, err := br.Claim(ctx, "default", 1, time.Minute, "test-worker")
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("Claim() = %v, %v, want job %s", jobs, err, id)
	}
	if _, err := br.Fail(ctx, jobs[0], reason, proto.NoRetry); err != nil {
		t.Fatalf("Fail() err = %v", err)
	}
}

// state is the job's state in Redis now ("" when it is gone).
func (b *bundle) state(t *testing.T, q, id string) queue.State {
	t.Helper()
	j, err := b.client.Get(context.Background(), q, id)
	if errors.Is(err, queue.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("Get(%s) err = %v", id, err)
	}
	return j.State
}

// register puts a live worker in the registry and returns its ID.
func (b *bundle) register(t *testing.T, id string) string {
	t.Helper()
	p := &queue.Process{ID: id, Kind: queue.KindWorker, Host: "h", PID: 1, Queues: map[string]int{"default": 1},
		Concurrency: 2, State: queue.ProcessRunning}
	if _, _, err := broker.Of(b.client).Register(context.Background(), p, time.Minute); err != nil {
		t.Fatalf("Register() err = %v", err)
	}
	return id
}

func brokerOf(b *bundle) broker.Broker { return broker.Of(b.client) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func brokerOfClient(c *queue.Client) broker.Broker { return broker.Of(c) }

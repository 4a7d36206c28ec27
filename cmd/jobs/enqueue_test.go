package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/jobs-dev/jobs/queue"
)

// A timeout under 1ms used to be stored as 0 and run with the 30 min default; a huge
// --max-retry printed "attempt 0 of -9223372036854775808". Each is refused with exit 2
// and one line naming the value, in every place a job's settings come from.
func TestEnqueueRefusesSubMillisecondTimeoutAndHugeMaxRetry(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"--timeout", "", []string{"enqueue", "--timeout", "500us", "t"}, "timeout 500µs is under the 1ms minimum"},
		{"--max-retry", "", []string{"enqueue", "--max-retry", "9223372036854775807", "t"}, "max retry 9223372036854775807 is over the limit"},
		{"cron add --timeout", "", []string{"cron", "add", "--timeout", "999us", "n", "@every 5s", "t"}, "timeout 999µs is under the 1ms minimum"},
		{"cron add --max-retry", "", []string{"cron", "add", "--max-retry", "2000000", "n", "@every 5s", "t"}, "max retry 2000000 is over the limit"},
		{"--file timeout", `{"type":"t","timeout":"10us"}` + "\n", []string{"enqueue", "--file", "-"}, "line 1: timeout 10µs is under the 1ms minimum"},
		{"--file max_retry", `{"type":"t","max_retry":9223372036854775807}` + "\n", []string{"enqueue", "--file", "-"}, "line 1: max retry 9223372036854775807 is over the limit"},
	} {
		r := jobs(t, p, tc.stdin, tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line with %q", tc.name, r.code, r.stderr, tc.want)
		}
	}
	client, _ := queue.NewClient(redistest.Client(t), queue.Config{Prefix: p})
	if st, _ := client.Stats(context.Background()); len(st) != 0 {
		t.Errorf("stats after refused enqueues = %+v, want no queue", st)
	}
}

// countingReader yields n bytes of 'x' and counts what was read.
type countingReader struct{ left, read int }

func (r *countingReader) Read(b []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(len(b), r.left)
	for i := range n {
		b[i] = 'x'
	}
	r.left -= n
	r.read += n
	return n, nil
}

// A payload on stdin over the limit used to be read whole (100 MB into memory) before
// being refused: it is now read up to the limit and one byte more.
func TestEnqueueStdinPayloadReadsAtMostTheLimit(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	in := &countingReader{left: 16 * queue.DefaultMaxPayload}
	var out, errb bytes.Buffer
	cliMu.Lock()
	code := run(context.Background(), []string{"jobs", "--redis", "redis://" + redistest.Shared(t).Addr,
		"--prefix", p, "enqueue", "t", "-"}, in, &out, &errb)
	cliMu.Unlock()
	if code != 2 || !strings.Contains(errb.String(), "payload") || strings.Count(errb.String(), "\n") != 1 {
		t.Errorf("enqueue of a %d-byte stdin payload: exit %d, stderr %q; want exit 2 and one line about the payload",
			16*queue.DefaultMaxPayload, code, errb.String())
	}
	if in.read > queue.DefaultMaxPayload+1 {
		t.Errorf("read %d bytes of stdin, want at most the limit + 1 (%d)", in.read, queue.DefaultMaxPayload+1)
	}
	// At the limit exactly, the job is enqueued.
	in = &countingReader{left: queue.DefaultMaxPayload}
	out.Reset()
	errb.Reset()
	cliMu.Lock()
	code = run(context.Background(), []string{"jobs", "--redis", "redis://" + redistest.Shared(t).Addr,
		"--prefix", p, "enqueue", "t", "-"}, in, &out, &errb)
	cliMu.Unlock()
	if code != 0 {
		t.Errorf("enqueue of a payload at the limit: exit %d, stderr %q; want 0", code, errb.String())
	}
}

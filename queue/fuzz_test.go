package queue

import (
	"strconv"
	"testing"
)

// FuzzDecodeJob: any hash content (hand-edited with redis-cli, written by another
// version) decodes without panicking, and payload pieces reassemble in order.
func FuzzDecodeJob(f *testing.F) {
	f.Add("email", "hello", "3", "1764700000000", "x", 2)
	f.Add("", "", "-1", "not a number", "", 0)
	f.Add("t", "\xff\x00", "99999999999999999999", "-5", "piece", 40)
	f.Fuzz(func(t *testing.T, typ, payload, attempt, created, piece string, pieces int) {
		h := map[string]string{"type": typ, "payload": payload, "attempt": attempt,
			"created_at": created, "max_retry": attempt, "timeout_ms": created, "state": "ready"}
		pieces = min(max(pieces, 0), 100)
		want := payload
		for n := 1; n <= pieces; n++ {
			h["payload+"+strconv.Itoa(n)] = piece
			want += piece
		}
		j := decodeJob("q", "id", h)
		if string(j.Payload) != want {
			t.Fatalf("payload %q, want %q", j.Payload, want)
		}
		if _, err := j.MarshalJSON(); err != nil {
			t.Fatalf("MarshalJSON: %v", err)
		}
	})
}

// FuzzOptions: no option value makes resolve or ID generation panic; a resolved queue
// name is always valid.
func FuzzOptions(f *testing.F) {
	f.Add("default", "id-1", "type", int64(0), 3)
	f.Add("a{b}", "", "", int64(-1), -1)
	f.Add("q", "with space", "t\n", int64(1<<62), 1<<30)
	f.Fuzz(func(t *testing.T, q, id, typ string, delay int64, maxRetry int) {
		o, err := resolve([]Option{On(q), ID(id), MaxRetry(maxRetry)})
		if err == nil && ValidateQueue(o.queue) != nil {
			t.Fatalf("resolve accepted queue %q", o.queue)
		}
		_ = ValidateType(typ)
	})
}

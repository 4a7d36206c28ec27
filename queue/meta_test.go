package queue

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Meta travels with the job: stored as fields of its hash, read back by Get and by the
// worker's claim.
func TestMetaTravelsWithTheJob(t *testing.T) {
	c := setup(t, Config{})
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	id, err := c.Enqueue(ctx, "t", []byte("p"), Meta("traceparent", tp), Meta("tenant", "acme"), Meta("tenant", "globex"))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := c.Enqueue(ctx, "t", nil)
	j, err := c.Get(ctx, DefaultQueue, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Meta) != 2 || j.Meta["traceparent"] != tp || j.Meta["tenant"] != "globex" {
		t.Errorf("Get: meta %v, want traceparent and the last tenant", j.Meta)
	}
	if enc := c.rdb.ObjectEncoding(ctx, c.keys.queue(DefaultQueue).job(id)).Val(); enc != "listpack" {
		t.Errorf("a job with 55-byte meta is encoded %s, want listpack", enc)
	}
	claimed, err := c.broker().Claim(ctx, DefaultQueue, 2, time.Minute, "w")
	if err != nil || len(claimed) != 2 {
		t.Fatalf("Claim = %d jobs, %v", len(claimed), err)
	}
	for _, cj := range claimed {
		if cj.ID == id && cj.Meta["traceparent"] != tp || cj.ID == plain && cj.Meta != nil {
			t.Errorf("claimed job %s meta %v", cj.ID, cj.Meta)
		}
	}
	// A batch groups jobs by their settings, meta included.
	res, err := c.EnqueueBatch(ctx, []BatchJob{
		{Type: "b", Options: []Option{Meta("k", "1")}},
		{Type: "b", Options: []Option{Meta("k", "2")}},
		{Type: "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"1", "2", ""} {
		j, _ := c.Get(ctx, DefaultQueue, res[i].ID)
		if j == nil || j.Meta["k"] != want {
			t.Errorf("batch job %d: %+v, want meta k=%q", i, j, want)
		}
	}
}

func TestMetaRefusesBadEntries(t *testing.T) {
	c := setup(t, Config{})
	many := make([]Option, MaxMeta+1)
	for i := range many {
		many[i] = Meta(strings.Repeat("k", i+1), "v")
	}
	for name, opts := range map[string][]Option{
		"empty key":  {Meta("", "v")},
		"tab in key": {Meta("a\tb", "v")},
		"newline":    {Meta("k", "a\nb")},
		"long value": {Meta("k", strings.Repeat("v", MaxMetaValue+1))},
		"bad UTF-8":  {Meta("k", "\xff")},
		"too many":   many,
		"space key":  {Meta("a b", "v")},
	} {
		if _, err := c.Enqueue(ctx, "t", nil, opts...); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

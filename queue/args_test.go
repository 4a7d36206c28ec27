package queue

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"
)

type report struct {
	Day string `json:"day"`
}

func (report) Kind() string { return "report:daily" }

func (report) JobOptions() []Option {
	return []Option{On("reports"), MaxRetry(3), Timeout(time.Minute)}
}

type ratio struct{ V float64 }

func (ratio) Kind() string { return "ratio" }

func TestEnqueueArgs(t *testing.T) {
	c := setup(t, Config{})
	id, err := c.EnqueueArgs(ctx, report{Day: "2026-12-05"}, MaxRetry(7)) // the caller's option wins
	if err != nil {
		t.Fatal(err)
	}
	j, err := c.Get(ctx, "reports", id)
	if err != nil {
		t.Fatal(err)
	}
	var got report
	if j.Type != "report:daily" || json.Unmarshal(j.Payload, &got) != nil || got.Day != "2026-12-05" ||
		j.MaxRetry != 7 || j.Timeout != time.Minute {
		t.Errorf("job %+v; want type report:daily, its JSON payload, max retry 7, timeout 1m", j)
	}
	// NaN does not encode to JSON: refused before anything is written.
	if _, err := c.EnqueueArgs(ctx, ratio{math.NaN()}); !errors.Is(err, ErrInvalid) {
		t.Errorf("EnqueueArgs(NaN) err = %v, want ErrInvalid", err)
	}
	if n := c.rdb.LLen(ctx, c.keys.queue(DefaultQueue).ready).Val(); n != 0 {
		t.Errorf("%d jobs written by a refused EnqueueArgs", n)
	}
	bj, err := ArgsJob(report{Day: "d"})
	if err != nil || bj.Type != "report:daily" || string(bj.Payload) != `{"day":"d"}` || len(bj.Options) != 3 {
		t.Errorf("ArgsJob() = %+v, %v", bj, err)
	}
}

package scripts

import (
	"context"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestLibDate checks the lib's UTC date, which names the daily counters that `jobs stats`
// reads with a date formatted by Go.
func TestLibDate(t *testing.T) {
	t.Parallel()
	lib, err := readLib()
	if err != nil {
		t.Fatal(err)
	}
	s := redis.NewScript(lib + "\nreturn ymd(tonumber(ARGV[1]))")
	rdb := redistest.Client(t)
	for _, d := range []time.Time{
		time.Unix(0, 0), time.Date(2000, 2, 29, 23, 59, 59, 999e6, time.UTC),
		time.Date(2024, 12, 31, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC), time.Now(),
	} {
		got, err := s.Run(context.Background(), rdb, nil, d.UnixMilli()).Text()
		if want := d.UTC().Format(time.DateOnly); err != nil || got != want {
			t.Errorf("ymd(%d) = %q, %v; want %q", d.UnixMilli(), got, err, want)
		}
	}
}

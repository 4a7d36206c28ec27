package scripts

import (
	"context"
	"strings"
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

// TestEnqueueIDTime checks enqueue.lua's id_ms, which reads a generated ID's time (ms)
// from its first ten characters, Crockford base32, to leave created_at out: every
// character of the alphabet at every place, times across the range, and no time from
// what is not such an ID.
func TestEnqueueIDTime(t *testing.T) {
	t.Parallel()
	src, err := files.ReadFile("enqueue.lua")
	if err != nil {
		t.Fatal(err)
	}
	from := strings.Index(string(src), "local function b32(")
	to := strings.Index(string(src), "-- The busy path:")
	if from < 0 || to < from {
		t.Fatal("enqueue.lua: no b32 and id_ms before the busy path")
	}
	s := redis.NewScript(string(src[from:to]) + "\nlocal t = id_ms(ARGV[1])\nif not t then return -1 end\nreturn t")
	rdb := redistest.Client(t)
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	encode := func(ms uint64) string { // the first ten characters of queue's encodeID
		var b [10]byte
		for i := 9; i >= 0; i-- {
			b[i] = alphabet[ms%32]
			ms /= 32
		}
		return string(b[:])
	}
	var times []uint64
	for place := range 10 { // each character at each place
		for v := range uint64(32) {
			times = append(times, v<<(5*(9-place)))
		}
	}
	times = append(times, 0, 1733380000123, uint64(time.Now().UnixMilli()), 1<<50-1)
	for _, ms := range times {
		id := encode(ms) + "0123456789ABCDEF"
		got, err := s.Run(context.Background(), rdb, nil, id).Int64()
		if err != nil || got != int64(ms) {
			t.Errorf("id_ms(%s) = %d, %v; want %d", id, got, err, ms)
		}
	}
	for _, bad := range []string{"", "order-1", "01234567ab0123456789ABCDEF", "0123456789ABCDEF012345678",
		"0123456789ABCDEF01234567890", "01I3456789ABCDEF0123456789", "01L3456789ABCDEF0123456789",
		"01O3456789ABCDEF0123456789", "01U3456789ABCDEF0123456789", "01:3456789ABCDEF0123456789",
		"01@3456789ABCDEF0123456789", "01[3456789ABCDEF0123456789", "01/3456789ABCDEF0123456789"} {
		if got, err := s.Run(context.Background(), rdb, nil, bad).Int64(); err != nil || got != -1 {
			t.Errorf("id_ms(%q) = %d, %v; want nil", bad, got, err)
		}
	}
}

package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// pageAll follows Page's cursors from the start and returns the IDs in order.
func pageAll(t *testing.T, c *Client, q string, st State, limit int, between func(page int)) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatalf("Page(%s) did not end after 100 pages", st)
		}
		p, err := c.Page(context.Background(), q, st, cursor, limit)
		if err != nil {
			t.Fatalf("Page(%s, %q) err = %v", st, cursor, err)
		}
		for _, j := range p.Jobs {
			ids = append(ids, j.ID)
		}
		if p.Next == "" {
			return ids
		}
		cursor = p.Next
		if between != nil {
			between(page)
		}
	}
}

func TestPageSortedSetsSplitTies(t *testing.T) {
	c := setup(t, Config{})
	ctx := context.Background()
	var want []string
	for i := range 25 {
		id := fmt.Sprintf("j%02d", i)
		// Five due times, five jobs each: ties the pages must split by ID.
		if _, err := c.Enqueue(ctx, "t", nil, ID(id), At(time.UnixMilli(int64(2e12)+int64(i/5)))); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	for _, limit := range []int{1, 3, 5, 7, 25, 100} {
		if got := pageAll(t, c, "default", StateScheduled, limit, nil); !slices.Equal(got, want) {
			t.Errorf("pages of %d = %v, want %v", limit, got, want)
		}
	}
}

// TestPageCursorJobLeft: the job a cursor names leaves the set between two pages; the
// next page goes on after its score and ID, skipping nothing and repeating nothing.
func TestPageCursorJobLeft(t *testing.T) {
	c := setup(t, Config{})
	ctx := context.Background()
	var want []string
	for i := range 12 {
		id := fmt.Sprintf("j%02d", i)
		if _, err := c.Enqueue(ctx, "t", nil, ID(id), At(time.UnixMilli(int64(2e12)+int64(i/4)))); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	removed := map[string]bool{}
	got := pageAll(t, c, "default", StateScheduled, 3, func(page int) {
		// Retry (make ready) the last job of the page just read: the cursor's job.
		id := want[page*3+2]
		if err := c.Retry(ctx, "default", id); err != nil {
			t.Fatal(err)
		}
		removed[id] = true
	})
	var left []string
	for _, id := range want {
		if !removed[id] || slices.Contains(got, id) {
			left = append(left, id)
		}
	}
	if !slices.Equal(got, left) {
		t.Errorf("pages with the cursor's job leaving = %v, want %v", got, left)
	}
}

func TestPageReadyAndDescending(t *testing.T) {
	c := setup(t, Config{})
	ctx := context.Background()
	var ids []string
	for range 10 {
		id, err := c.Enqueue(ctx, "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if got := pageAll(t, c, "default", StateReady, 4, nil); !slices.Equal(got, ids) {
		t.Errorf("ready pages = %v, want claim order (oldest first) %v", got, ids)
	}
	// Dead: most recent first.
	b := c.broker()
	var dead []string
	for range 5 {
		js, err := b.Claim(ctx, "default", 1, time.Minute, "w")
		if err != nil || len(js) != 1 {
			t.Fatalf("Claim() = %v, %v", js, err)
		}
		if _, err := b.Fail(ctx, js[0], "x", -1); err != nil {
			t.Fatal(err)
		}
		dead = append([]string{js[0].ID}, dead...)
		time.Sleep(2 * time.Millisecond) // distinct died_at
	}
	if got := pageAll(t, c, "default", StateDead, 2, nil); !slices.Equal(got, dead) {
		t.Errorf("dead pages = %v, want newest first %v", got, dead)
	}
}

func TestPageRefusesBadInput(t *testing.T) {
	c := setup(t, Config{})
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		q      string
		st     State
		cursor string
		limit  int
		want   error
	}{
		{"default", StateReady, "", 0, ErrInvalid},
		{"default", StateReady, "", MaxPage + 1, ErrInvalid},
		{"default", StateReady, "x", 5, ErrInvalid},
		{"default", StateReady, "-3", 5, ErrInvalid},
		{"default", StateReady, "007", 5, ErrInvalid},
		{"default", StateDead, "12", 5, ErrInvalid},
		{"default", StateDead, "NaN:x", 5, ErrInvalid},
		{"default", StateDead, "1:", 5, ErrInvalid},
		{"default", "bogus", "", 5, ErrInvalid},
		{"no such", StateReady, "", 5, ErrInvalid},
		{"nosuch", StateReady, "", 5, ErrNotFound},
	} {
		if _, err := c.Page(ctx, tc.q, tc.st, tc.cursor, tc.limit); !errors.Is(err, tc.want) {
			t.Errorf("Page(%q, %q, %q, %d) err = %v, want %v", tc.q, tc.st, tc.cursor, tc.limit, err, tc.want)
		}
	}
}

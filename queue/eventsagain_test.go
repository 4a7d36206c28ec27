package queue

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The claim's and the ack's events repeat the line before them as the job's ID alone
// (event_again in scripts/lib) only while nothing else changed: a job of another type,
// another attempt, or an event of another kind between them (a cancelled job's dead)
// starts a full line again. The stream's raw lines, as readers of any version parse them.
func TestEventsRepeatOnlyTheSameEvent(t *testing.T) {
	c := setup(t, Config{DoneRetention: -1})
	stream := c.keys.queue("default").events
	a1, a2, a3, a4 := mustEnqueue(t, c, "a"), mustEnqueue(t, c, "a"), mustEnqueue(t, c, "a"), mustEnqueue(t, c, "a")
	b1 := mustEnqueue(t, c, "b")
	jobs, err := c.broker().Claim(ctx, "default", 5, time.Minute, "w")
	if err != nil || len(jobs) != 5 {
		t.Fatalf("Claim(5) = %d jobs, %v; want 5", len(jobs), err)
	}
	if _, err := c.Cancel(ctx, "default", a3); err != nil {
		t.Fatalf("Cancel() err = %v", err)
	}
	fin := make([]Finished, len(jobs))
	for i, j := range jobs {
		fin[i] = Finished{Job: j}
	}
	if _, _, err := c.broker().ackFinished(ctx, "default", fin, 0, time.Minute, "w"); err != nil {
		t.Fatalf("AckClaim() err = %v", err)
	}
	entries, err := c.rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil || len(entries) < 2 {
		t.Fatalf("XRANGE = %d entries, %v", len(entries), err)
	}
	line := func(name, id, typ, worker, err string) string {
		return strings.Join([]string{name, id, typ, "1", worker, err}, "\t")
	}
	claimed := strings.Split(entries[len(entries)-3].Values["event"].(string), "\n")
	if want := []string{line("started", a1, "a", "w", ""), a2, a3, a4, line("started", b1, "b", "w", "")}; !slices.Equal(claimed, want) {
		t.Errorf("claim's lines:\n%q\nwant:\n%q", claimed, want)
	}
	acked := strings.Split(entries[len(entries)-1].Values["event"].(string), "\n")
	// a4's done follows a3's dead: a line of its own, though its values are a2's.
	if want := []string{line("done", a1, "a", "w", ""), a2, line("dead", a3, "a", "w", "cancelled by operator"),
		line("done", a4, "a", "w", ""), line("done", b1, "b", "w", "")}; !slices.Equal(acked, want) {
		t.Errorf("ack's lines:\n%q\nwant:\n%q", acked, want)
	}
}

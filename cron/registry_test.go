package cron

import (
	"errors"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// entryOf returns the registry's entry of id, or nil when it is not listed.
func entryOf(t *testing.T, c *queue.Client, id string) *queue.Process {
	t.Helper()
	ps, err := c.Processes(ctx)
	if err != nil {
		t.Fatalf("Processes() err = %v", err)
	}
	for _, p := range ps {
		if p.ID == id {
			return p
		}
	}
	return nil
}

func waitEntry(t *testing.T, c *queue.Client, id string, within time.Duration, what string, cond func(*queue.Process) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond(entryOf(t, c, id)) {
		if time.Since(start) > within {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// A scheduler is listed once Run starts; quiet, it fires no tick (within one beat); told
// to stop, Run returns within a beat and the entry is gone at once.
func TestSchedulerRegistryQuietThenStop(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	const beat = 200 * time.Millisecond
	s, err := New(c, Config{Entries: []Entry{{Name: "tick", Spec: "@every 1s", Type: "t"}}, Beat: beat, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	returned := false // Run's result was taken from done
	t.Cleanup(func() {
		if !returned {
			_ = c.Stop(ctx, s.cfg.ID)
			<-done
		}
	})
	waitEntry(t, c, s.cfg.ID, time.Second, "scheduler listed within 1s", func(p *queue.Process) bool {
		return p != nil && p.Kind == queue.KindScheduler && p.State == queue.ProcessRunning && len(p.Queues) == 0
	})
	if err := c.Quiet(ctx, s.cfg.ID); err != nil {
		t.Fatal(err)
	}
	waitEntry(t, c, s.cfg.ID, beat+500*time.Millisecond, "quiet within one beat", func(p *queue.Process) bool {
		return p != nil && p.State == queue.ProcessQuiet
	})
	quietAt := time.Now()
	time.Sleep(2200 * time.Millisecond) // two ticks of the entry pass
	if fired := cronJobs(t, c, "tick", quietAt.Unix()+1, time.Now().Unix()); len(fired) > 0 {
		t.Errorf("a quiet scheduler fired ticks %v", fired)
	}
	if err := c.Stop(ctx, s.cfg.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		returned = true
		if err != nil {
			t.Errorf("Run() after Stop = %v", err)
		}
	case <-time.After(beat + time.Second):
		t.Fatal("Run() did not return within a beat of Stop")
	}
	if p := entryOf(t, c, s.cfg.ID); p != nil {
		t.Errorf("stopped scheduler still listed: %+v", p)
	}
	if err := c.Stop(ctx, s.cfg.ID); !errors.Is(err, queue.ErrNoProcess) {
		t.Errorf("Stop(stopped scheduler) = %v, want ErrNoProcess", err)
	}
}

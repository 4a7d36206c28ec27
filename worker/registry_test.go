package worker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// process returns the registry's entry of id, or nil when it is not listed.
func process(t *testing.T, c *queue.Client, id string) *queue.Process {
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

// waitProcess waits until id's entry satisfies cond (nil: not listed) and returns how
// long that took.
func waitProcess(t *testing.T, c *queue.Client, id string, within time.Duration, what string, cond func(*queue.Process) bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond(process(t, c, id)) {
		if time.Since(start) > within {
			t.Fatalf("after %s: %s (entry %+v)", within, what, process(t, c, id))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// A worker is listed as soon as Run starts, with what it serves; told to be quiet it
// claims nothing more within one beat, while its running job keeps its lease through
// heartbeats and finishes; told to stop it returns from Run within one beat and leaves
// the list at once.
func TestWorkerRegistryQuietThenStop(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	const beat, lease = 300 * time.Millisecond, 600 * time.Millisecond
	release := make(chan struct{})
	started := make(chan string, 4)
	mux := NewMux()
	mux.HandleFunc("slow", func(ctx context.Context, j *queue.Job) error {
		started <- j.ID
		<-release
		return nil
	})
	w, err := New(c, Config{Handler: mux, Queues: map[string]int{"default": 3}, Concurrency: 2, Beat: beat, Lease: lease,
		Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runStart := time.Now()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	returned := false // Run's result was taken from done
	t.Cleanup(func() {
		if !returned {
			_ = c.Stop(ctx, w.ID())
			<-done
		}
	})
	listed := waitProcess(t, c, w.ID(), time.Second, "worker listed within 1s of Run", func(p *queue.Process) bool { return p != nil })
	p := process(t, c, w.ID())
	if p.Kind != queue.KindWorker || p.Queues["default"] != 3 || !slices.Equal(p.Types, []string{"slow"}) ||
		p.Concurrency != 2 || p.State != queue.ProcessRunning || p.StartedAt.IsZero() || p.PID == 0 || p.Host == "" {
		t.Errorf("registry entry = %+v", p)
	}
	running := enqueue(t, c, "slow", "")
	<-started
	waitProcess(t, c, w.ID(), 2*beat, "busy 1 with the running job listed", func(p *queue.Process) bool {
		return p != nil && p.Busy == 1 && len(p.Running) == 1 && p.Running[0].ID == running
	})

	if err := c.Quiet(ctx, w.ID()); err != nil {
		t.Fatal(err)
	}
	quietIn := waitProcess(t, c, w.ID(), beat+500*time.Millisecond, "quiet within one beat", func(p *queue.Process) bool {
		return p != nil && p.State == queue.ProcessQuiet
	})
	waiting := enqueue(t, c, "slow", "")
	// The running job outlives three leases: it ends done only if the quiet worker went on
	// renewing its lease.
	time.Sleep(3 * lease)
	close(release)
	waitState(t, c, "default", running, queue.StateDone, 5*time.Second)
	if j, err := c.Get(ctx, "default", waiting); err != nil || j.State != queue.StateReady {
		t.Errorf("job enqueued after quiet: %+v, %v; want ready (a quiet worker claims nothing)", j, err)
	}

	ordered := time.Now()
	if err := c.Stop(ctx, w.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		returned = true
		if err != nil {
			t.Errorf("Run() after Stop = %v, want nil", err)
		}
	case <-time.After(beat + time.Second):
		t.Fatal("Run() did not return within a beat of Stop")
	}
	stopIn := time.Since(ordered)
	if p := process(t, c, w.ID()); p != nil {
		t.Errorf("stopped worker still listed: %+v", p)
	}
	if err := c.Quiet(ctx, w.ID()); !errors.Is(err, queue.ErrNoProcess) {
		t.Errorf("Quiet(stopped worker) = %v, want ErrNoProcess", err)
	}
	t.Logf("FIGURES worker registry (beat %s): listed %s after Run, quiet obeyed %s after the order, Run returned %s after Stop (whole run %s)",
		beat, listed.Round(time.Millisecond), quietIn.Round(time.Millisecond), stopIn.Round(time.Millisecond),
		time.Since(runStart).Round(time.Millisecond))
}

func TestBeatUnder100msRefused(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	if _, err := New(c, Config{Handler: NewMux(), Beat: 50 * time.Millisecond}); err == nil {
		t.Error("New(Beat 50ms) err = nil, want an error naming Config.Beat")
	}
}

package dash

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jobs-dev/jobs/queue"
)

// whyWaiting answers "why is this job not moving?" for a job that waits or runs, from
// what Redis holds now: its due time, its queue's pause, the live workers (whether any
// claims from its queue and has a handler for its type), its exclusive lock, an expired
// lease not yet reaped, a limit of its queue or of its limit key (lw), and a Redis that
// refuses writes. now is Redis's time. Empty when nothing holds it back.
func (h *Handler) whyWaiting(ctx context.Context, j *queue.Job, det *queue.Detail, lw queue.JobLimitWait, now time.Time) ([]string, error) {
	switch j.State {
	case queue.StateReady, queue.StateScheduled, queue.StateRetry, queue.StateActive:
	default:
		return nil, nil
	}
	var why []string
	if j.State == queue.StateActive {
		if !det.LeaseDeadline.IsZero() && now.After(det.LeaseDeadline) {
			why = append(why, fmt.Sprintf("its lease expired %s ago (worker %s stopped renewing it): it goes back "+
				"to ready at the next reap", roundDur(now.Sub(det.LeaseDeadline)), j.Worker))
		}
		return why, nil
	}
	if j.State != queue.StateReady && j.RunAt.After(now) {
		why = append(why, "waits for its run time, in "+roundDur(j.RunAt.Sub(now)))
	}
	st, err := h.client.StatsOf(ctx, j.Queue)
	if err != nil {
		return nil, err
	}
	if st[0].Paused {
		why = append(why, "its queue is paused")
	}
	if lw.On != "" {
		msg := "held back by " + lw.Desc
		if !lw.Until.IsZero() {
			msg += " until " + lw.Until.UTC().Format("2006-01-02 15:04:05.000Z")
			if d := lw.Until.Sub(now); d > 0 {
				msg += " (in " + roundDur(d) + ")"
			}
		}
		why = append(why, msg)
	}
	ps, err := h.client.Processes(ctx)
	if err != nil {
		return nil, err
	}
	claiming, handling := 0, 0
	for _, p := range ps {
		if _, ok := p.Queues[j.Queue]; !ok || p.Kind != queue.KindWorker || p.State != queue.ProcessRunning {
			continue
		}
		claiming++
		if len(p.Types) == 0 || slices.Contains(p.Types, j.Type) {
			handling++
		}
	}
	switch {
	case claiming == 0:
		why = append(why, "no live worker claims from queue "+j.Queue)
	case handling == 0:
		why = append(why, "no live worker claiming from its queue has a handler for its type")
	}
	if j.Exclusive != "" && det.LockHeld {
		why = append(why, "its exclusive lock "+j.Exclusive+" is held by another job")
	}
	info, err := h.client.ServerInfo(ctx)
	if err != nil {
		return nil, err
	}
	why = append(why, serverWarnings(info)...)
	return why, nil
}

package worker

import (
	"log/slog"

	"github.com/jobs-dev/jobs/queue"
)

// Log attribute keys, the same in every log line of the project.
const (
	attrJobID   = "job_id"
	attrJobType = "job_type"
	attrQueue   = "queue"
	attrAttempt = "attempt"
	attrWorker  = "worker_id"
)

// jobAttrs are the attributes every log record about one job carries.
func jobAttrs(job *queue.Job) []any {
	return []any{slog.String(attrJobID, job.ID), slog.String(attrJobType, job.Type),
		slog.String(attrQueue, job.Queue), slog.Int(attrAttempt, job.Attempt)}
}

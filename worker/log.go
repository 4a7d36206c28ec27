package worker

// Log attribute keys, the same in every log line of the project.
const (
	attrJobID   = "job_id"
	attrJobType = "job_type"
	attrQueue   = "queue"
	attrAttempt = "attempt"
	attrWorker  = "worker_id"
)

package dash

import (
	"net/http"

	"github.com/jobs-dev/jobs/internal/printable"
	"github.com/jobs-dev/jobs/queue"
)

// graphSide is the most jobs the workflow graph shows on each side of a job: a fan-in or
// fan-out of thousands would make the page unreadable and cost a read per job.
const graphSide = 50

// batchPage shows a batch's state, counts and callbacks. Its JSON is the object
// `jobs batch inspect --json` prints. A batch keeps its pending children in a set and no
// list of all of them, so the page shows counts, not children.
func (h *Handler) batchPage(w http.ResponseWriter, r *http.Request) {
	id, q := r.PathValue("id"), r.URL.Query().Get("queue")
	var st *queue.BatchStatus
	var err error
	if q == "" {
		st, err = h.client.FindBatch(r.Context(), id)
	} else {
		st, err = h.client.BatchStatus(r.Context(), queue.BatchRef{Queue: q, ID: id})
	}
	if err != nil {
		h.failQueue(w, r, err)
		return
	}
	page := batchView{BatchStatus: st, CLI: "jobs batch inspect --queue " + shellQuote(st.Queue) + " " + shellQuote(st.ID)}
	h.render(w, r, "batch", "Batch "+printable.Escape(st.ID, false), st, page)
}

// batchView is the batch page's data: the batch and the command showing it from a shell.
type batchView struct {
	*queue.BatchStatus
	CLI string
}

// graphNode is one job beside the page's job in its workflow graph.
type graphNode struct {
	queue.JobRef
	State   queue.State // "": its record is gone (purged, deleted or expired)
	Pending bool        // a dependency the job still waits for
}

// workflowGraph is a job's neighbourhood: its dependencies (upstream) and dependents
// (downstream), at most graphSide each, with how many more there are.
type workflowGraph struct {
	Up, Down         []graphNode
	UpMore, DownMore int
}

// graphOf builds j's graph from its dependencies (read for the first graphSide only) and
// the dependents read (graphSide at most, of dependentsN).
func graphOf(j *queue.Job, deps []queue.Dependency, dependents []queue.Dependent, dependentsN int) *workflowGraph {
	if len(deps) == 0 && len(dependents) == 0 {
		return nil
	}
	g := &workflowGraph{UpMore: len(j.After) - len(deps), DownMore: max(0, dependentsN-len(dependents))}
	for _, d := range deps {
		g.Up = append(g.Up, graphNode{JobRef: d.JobRef, State: d.State, Pending: d.Pending})
	}
	for _, d := range dependents {
		g.Down = append(g.Down, graphNode{JobRef: d.JobRef, State: d.State})
	}
	return g
}

package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progressEvery is how often the progress line is rewritten: often enough to look alive,
// rarely enough not to cost the run anything.
const progressEvery = 200 * time.Millisecond

// progress keeps one line up to date on w: "\rjobs bench MODE: PHASE done/total (pct) elapsed".
// A nil *progress (no writer) does nothing.
type progress struct {
	w     io.Writer
	mode  string
	start time.Time
	stopc chan struct{}
	wg    sync.WaitGroup

	mu    sync.Mutex
	name  string
	total int64
	done  func() int64
	width int // of the last line written, to blank out what a shorter line leaves
}

func newProgress(w io.Writer, mode string) *progress {
	if w == nil {
		return nil
	}
	p := &progress{w: w, mode: mode, start: time.Now(), stopc: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				return
			case <-t.C:
				p.render()
			}
		}
	})
	return p
}

// phase starts a new phase of total steps, done() of which are complete.
func (p *progress) phase(name string, total int64, done func() int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.name, p.total, p.done = name, total, done
}

func (p *progress) render() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return
	}
	n := p.done()
	line := fmt.Sprintf("jobs bench %s: %s %d/%d (%.0f%%) %.1fs", p.mode, p.name, n, p.total,
		100*float64(n)/float64(max(p.total, 1)), time.Since(p.start).Seconds())
	pad := max(p.width-len(line), 0)
	p.width = len(line)
	fmt.Fprint(p.w, "\r"+line+strings.Repeat(" ", pad))
}

// close writes the line a last time and ends it.
func (p *progress) close() {
	if p == nil {
		return
	}
	close(p.stopc)
	p.wg.Wait()
	p.render()
	fmt.Fprint(p.w, "\n")
}

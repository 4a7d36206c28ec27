package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/queue"
)

// fileJob is one line of `jobs enqueue --file`: the flags of `jobs enqueue`, as JSON.
type fileJob struct {
	Type         string          `json:"type"`
	Payload      json.RawMessage `json:"payload"` // a JSON string is stored as its text; anything else as its JSON
	Queue        string          `json:"queue"`
	Delay        string          `json:"delay"`
	At           string          `json:"at"`
	ID           string          `json:"id"`
	MaxRetry     *int            `json:"max_retry"`
	Timeout      string          `json:"timeout"`
	UniqueFor    string          `json:"unique_for"`
	UniqueKey    string          `json:"unique_key"`
	Exclusive    bool            `json:"exclusive"`
	ExclusiveKey string          `json:"exclusive_key"`
	LimitKey     *string         `json:"limit_key"`
}

// fileBatch is how many lines go into one EnqueueBatch: one round trip each.
const fileBatch = 1000

// maxLine bounds one line of a --file: room for a payload at the default limit, even
// escaped as a JSON string, and the job's other fields.
const maxLine = 2*queue.DefaultMaxPayload + 64<<10

// enqueueFile enqueues the JSON lines of path ("-": stdin) in batches. A bad line stops it
// with the line's number and how many jobs were enqueued before it, all of them from the
// lines above, so `tail -n +N` of the fixed file resumes.
func enqueueFile(c *cli.Context, e *env, client *queue.Client, path string) error {
	var r io.Reader = e.stdin
	var size int64
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			size = st.Size()
		}
		r = f
	}
	var progress io.Writer
	if f, ok := e.stderr.(*os.File); ok && isTerminal(f) {
		progress = f
	}
	start := time.Now()
	var read int64
	enqueued, dups := 0, 0
	var batch []queue.BatchJob
	var lines []int // lines[i]: the line of batch[i]
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := client.EnqueueBatch(c.Context, batch)
		if res == nil { // nothing was written: a bad job (Check passed, so rare) or ctx done
			return fmt.Errorf("after %d jobs enqueued: %w", enqueued, err)
		}
		var failed, uncertain []int
		for i, r := range res {
			switch {
			case r.Err == nil:
				enqueued++
			case errors.Is(r.Err, queue.ErrDuplicate):
				dups++
			case errors.Is(r.Err, queue.ErrUncertain):
				uncertain = append(uncertain, i)
			default:
				failed = append(failed, i)
			}
		}
		if len(failed)+len(uncertain) > 0 {
			return fileBatchError(e, path, res, lines, failed, uncertain, enqueued)
		}
		batch, lines = batch[:0], lines[:0]
		if progress != nil {
			pct := ""
			if size > 0 {
				pct = fmt.Sprintf(" %3.0f%%", 100*float64(read)/float64(size))
			}
			fmt.Fprintf(progress, "\r%s enqueued %d jobs (%d duplicates) %.0f jobs/s ", pct, enqueued, dups,
				float64(enqueued+dups)/time.Since(start).Seconds())
		}
		return nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		read += int64(len(text)) + 1
		bj, ok, err := lineJob(client, line, text, c.String("queue"))
		if !ok {
			continue
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return usagef("%s line %d: %v (%d jobs from the lines above were enqueued; fix it and resume with tail -n +%d)",
				path, line, err, enqueued, line)
		}
		batch, lines = append(batch, bj), append(lines, line)
		if len(batch) == fileBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if ferr := flush(); ferr != nil {
			return ferr
		}
		// The scanner stopped inside line+1: that is the line to name.
		if errors.Is(err, bufio.ErrTooLong) {
			return usagef("%s line %d: longer than %d bytes (%d jobs from the lines above were enqueued; fix it and resume with tail -n +%d)",
				path, line+1, maxLine, enqueued, line+1)
		}
		return fmt.Errorf("%s line %d: %w (%d jobs from the lines above were enqueued)", path, line+1, err, enqueued)
	}
	if err := flush(); err != nil {
		return err
	}
	if progress != nil {
		fmt.Fprintln(progress)
	}
	fmt.Fprintf(e.stdout, "enqueued %d jobs (%d duplicates skipped) in %.2fs\n", enqueued, dups, time.Since(start).Seconds())
	return nil
}

// maxListed bounds the lines fileBatchError lists one by one.
const maxListed = 20

// fileBatchError reports the lines of a batch that were not enqueued, or may not have
// been, one per line on stderr (the first maxListed of each), and returns the summary
// error. The lines enqueued stay enqueued; the caller stops there, since what refused
// these (a full Redis, a lost connection) would refuse the next ones.
func fileBatchError(e *env, path string, res []queue.BatchResult, lines, failed, uncertain []int, enqueued int) error {
	// One cause for all (a full Redis refuses every line alike): said once, in the
	// summary, rather than on every line.
	var cause error
	for _, idx := range [][]int{failed, uncertain} {
		for _, i := range idx {
			if cause == nil {
				cause = res[i].Err
			} else if res[i].Err.Error() != cause.Error() {
				cause = nil
				break
			}
		}
	}
	list := func(idx []int, what string) string {
		nums := make([]string, 0, min(len(idx), maxListed))
		for n, i := range idx {
			if n < maxListed {
				if cause == nil {
					fmt.Fprintf(e.stderr, "%s line %d: job %s %s: %s\n", path, lines[i], res[i].ID, what, describe(res[i].Err))
				}
				nums = append(nums, strconv.Itoa(lines[i]))
			}
		}
		if len(idx) > maxListed {
			nums = append(nums, fmt.Sprintf("and %d more", len(idx)-maxListed))
		}
		return strings.Join(nums, ", ")
	}
	msg := fmt.Sprintf("%s: %d jobs enqueued in all", path, enqueued)
	if len(failed) > 0 {
		msg += fmt.Sprintf("; %d not enqueued (lines %s)", len(failed), list(failed, "not enqueued"))
	}
	if len(uncertain) > 0 {
		msg += fmt.Sprintf("; %d may or may not be enqueued (lines %s; jobs inspect ID tells)",
			len(uncertain), list(uncertain, "may or may not be enqueued"))
	}
	if cause != nil {
		msg += ": " + describe(cause)
	}
	return errors.New(msg + "; stopped after line " + strconv.Itoa(lines[len(lines)-1]))
}

// parseFileJob reads one line's job; a line without "queue" goes on defQueue (--queue).
func parseFileJob(b []byte, defQueue string) (queue.BatchJob, error) {
	var fj fileJob
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fj); err != nil {
		return queue.BatchJob{}, jsonError(err)
	}
	// One object per line: anything after it (a second object, garbage) would otherwise
	// be dropped without a word.
	if _, err := dec.Token(); err != io.EOF {
		return queue.BatchJob{}, fmt.Errorf("not a job object: more follows the object (one object per line)")
	}
	fields := map[string]string{"delay": fj.Delay, "at": fj.At, "unique-for": fj.UniqueFor, "unique-key": fj.UniqueKey}
	if err := jobConflict(func(f string) bool { return fields[f] != "" },
		func(f string) string { return strconv.Quote(strings.ReplaceAll(f, "-", "_")) }); err != nil {
		return queue.BatchJob{}, err
	}
	bj := queue.BatchJob{Type: fj.Type}
	if len(fj.Payload) > 0 && string(fj.Payload) != "null" {
		var s string
		if json.Unmarshal(fj.Payload, &s) == nil {
			bj.Payload = []byte(s)
		} else {
			bj.Payload = []byte(fj.Payload)
		}
	}
	if fj.Queue == "" {
		fj.Queue = defQueue
	}
	if fj.Queue != "" {
		bj.Options = append(bj.Options, queue.On(fj.Queue))
	}
	dur := func(name, v string, opt func(time.Duration) queue.Option) error {
		if v == "" {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%s %q: want a duration like 30s or 5m", name, v)
		}
		bj.Options = append(bj.Options, opt(d))
		return nil
	}
	if err := dur("delay", fj.Delay, queue.Delay); err != nil {
		return bj, err
	}
	if err := dur("timeout", fj.Timeout, queue.Timeout); err != nil {
		return bj, err
	}
	if err := dur("unique_for", fj.UniqueFor, queue.Unique); err != nil {
		return bj, err
	}
	if fj.At != "" {
		at, err := time.Parse(time.RFC3339, fj.At)
		if err != nil {
			return bj, fmt.Errorf("at %q: want RFC 3339 like 2026-12-24T18:00:00Z", fj.At)
		}
		bj.Options = append(bj.Options, queue.At(at))
	}
	if fj.ID != "" {
		bj.Options = append(bj.Options, queue.ID(fj.ID))
	}
	if fj.MaxRetry != nil {
		bj.Options = append(bj.Options, queue.MaxRetry(*fj.MaxRetry))
	}
	if fj.UniqueKey != "" {
		bj.Options = append(bj.Options, queue.UniqueKey(fj.UniqueKey))
	}
	if fj.Exclusive || fj.ExclusiveKey != "" {
		bj.Options = append(bj.Options, queue.Exclusive(fj.ExclusiveKey))
	}
	if fj.LimitKey != nil {
		bj.Options = append(bj.Options, queue.LimitKey(*fj.LimitKey))
	}
	return bj, nil
}

// enqueueFileBatch enqueues the JSON lines of path as one batch (`jobs enqueue --file F
// --batch`), with the callbacks of --on-complete, --on-success and --on-death on --queue,
// and prints the batch's ID. Every line is read and checked first: a bad line enqueues
// nothing. A batch whose jobs were not all enqueued stays creating (it cannot end), and
// the error says so.
func enqueueFileBatch(c *cli.Context, e *env, client *queue.Client, path string) error {
	var r io.Reader = e.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	var jobs []queue.BatchJob
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for line := 1; sc.Scan(); line++ {
		bj, ok, err := lineJob(client, line, sc.Bytes(), c.String("queue"))
		if !ok {
			continue
		}
		if err != nil {
			return usagef("%s line %d: %v (nothing enqueued)", path, line, err)
		}
		jobs = append(jobs, bj)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w (nothing enqueued)", path, err)
	}
	if len(jobs) == 0 {
		return usagef("%s: no jobs: a batch needs at least one", path)
	}
	o := queue.BatchOptions{Queue: c.String("queue")}
	for _, cb := range []struct {
		flag string
		to   **queue.Callback
	}{{"on-complete", &o.OnComplete}, {"on-success", &o.OnSuccess}, {"on-death", &o.OnDeath}} {
		if c.IsSet(cb.flag) {
			*cb.to = &queue.Callback{Type: c.String(cb.flag)}
		}
	}
	ref, _, err := client.NewBatch(c.Context, o, jobs)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, ref.ID)
	return nil
}

// lineJob reads the job of one line of a --file (its number: line), checked as Enqueue
// would, on defQueue unless the line names its queue; ok is false for a blank line. A UTF-8 byte order mark, as some Windows editors
// write, is no part of line 1's JSON.
func lineJob(client *queue.Client, line int, text []byte, defQueue string) (bj queue.BatchJob, ok bool, err error) {
	if line == 1 {
		text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
	}
	if len(bytes.TrimSpace(text)) == 0 {
		return bj, false, nil
	}
	bj, err = parseFileJob(text, defQueue)
	if err == nil {
		err = client.Check(bj)
	}
	return bj, true, err
}

// jsonError says what is wrong with a line that did not decode as a fileJob, in the
// words of the file format: encoding/json names Go types and struct fields.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		want := "a string"
		switch te.Type.Kind() {
		case reflect.Int, reflect.Int64:
			want = "a whole number"
		case reflect.Bool:
			want = "true or false"
		}
		if te.Field == "payload" {
			want = "any JSON value"
		}
		return fmt.Errorf("%q: want %s, not a JSON %s", te.Field, want, te.Value)
	case errors.As(err, &te):
		return fmt.Errorf("not a job object: a JSON %s, want an object like {\"type\":\"email\"}", te.Value)
	case errors.As(err, &se):
		return fmt.Errorf("not a job object: invalid JSON at byte %d", se.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("not a job object: the JSON ends early")
	}
	// encoding/json's other errors (an unknown field) name no Go identifier.
	return fmt.Errorf("not a job object: %s", strings.TrimPrefix(err.Error(), "json: "))
}

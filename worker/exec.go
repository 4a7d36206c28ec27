package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jobs-dev/jobs/internal/shellwords"
	"github.com/jobs-dev/jobs/queue"
)

// ExitRetry is the exit code (EX_TEMPFAIL) by which an exec handler asks for a retry
// without reporting an error: the attempt still counts against max_retry.
const ExitRetry = 75

// ExitSnooze is the exit code by which an exec handler snoozes the job (see Snooze): the
// last line of its stdout says for how long, as a Go duration ("30s", "5m") or a number
// of seconds. The attempt is not counted. Without a delay there, the attempt fails,
// saying so.
const ExitSnooze = 76

// ExitPauseKey is the exit code by which an exec handler pauses its job's limit key (see
// PauseKey): the last line of its stdout says for how long, as for ExitSnooze. No job of
// the key starts before then; this one runs first when the pause ends, its attempt not
// counted. JOB_LIMIT_KEY holds the job's limit key (empty when it has none: the job is
// then snoozed).
const ExitPauseKey = 77

// Output limits of an exec handler. A job's result is its program's stdout if that is at
// most MaxExecResult bytes; a longer one is cut, and a last line says so:
// "[jobs: output truncated: first N of M bytes kept]", with the result still at most
// MaxExecResult bytes. The job still succeeds: its work is done, and retrying it would
// not make its output shorter. Only the last MaxExecStderr bytes of stderr go into
// last_error.
const (
	MaxExecResult = 1 << 20
	MaxExecStderr = 4 << 10
)

// Exec is a Handler that runs a program for each job (`jobs worker --run TYPE=COMMAND`).
// The program gets the payload on stdin and JOB_ID, JOB_TYPE, JOB_QUEUE, JOB_ATTEMPT and JOB_LIMIT_KEY
// in its environment; it is run directly, never through a shell, so a payload can never
// be interpreted as shell code. Exit 0 succeeds with stdout as the job's result,
// ExitRetry (75) asks for a retry, ExitSnooze (76) snoozes the job, ExitPauseKey (77)
// pauses its limit key, anything else fails
// with the tail of stderr as the error. When the job's context ends (timeout, lost lease, cancel, shutdown) the
// program's whole process group is killed; on Linux the program is also killed when the
// worker dies, even by SIGKILL, so it cannot run on beside the job's next attempt.
//
// The program reports progress (see Progress) by writing lines "PERCENT [MESSAGE]" to
// file descriptor 3, whose number is also in JOB_PROGRESS_FD: `echo "40 resizing" >&3`.
// PERCENT is a number from 0 to 100 (a fraction is dropped, a trailing % allowed), the
// rest of the line the message. Lines that do not start with such a number, and lines
// over 4 KiB, are ignored; the latest good line wins. A program that never writes there
// loses nothing.
//
// A job of a workflow also gets JOB_AFTER, its dependencies "queue/id" separated by
// spaces (see queue.After), and, when Client is set, JOB_DEPENDENCIES: a JSON array of
// {"queue","id","state","result"} (result: the dependency's result when it is done, as a
// string, or "result_base64" when it is not UTF-8), read when the job starts; when that
// would pass MaxExecDependencies bytes the results are left out ("result_omitted": true)
// and the program reads them with `jobs inspect --json QUEUE/ID`. A job of a batch gets
// JOB_BATCH, "queue/batch".
type Exec struct {
	Args   []string      // program and arguments
	Client *queue.Client // reads the dependencies' results (JOB_DEPENDENCIES); nil: none
}

// MaxExecDependencies bounds JOB_DEPENDENCIES: the environment of a program is limited
// (on Linux a single string to 128 KiB).
const MaxExecDependencies = 64 << 10

// NewExec parses command into words the way a POSIX shell would, without expanding
// anything: blanks separate words; 'single quotes' keep everything literally; "double
// quotes" keep everything but \" \\ \$ and \` escapes; a backslash outside quotes escapes
// the next character. Variables, globs, pipes and redirections are not interpreted: use
// `sh -c '...'` for those.
func NewExec(command string) (*Exec, error) {
	args, err := shellwords.Split(command)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return nil, errors.New("empty command")
	}
	return &Exec{Args: args}, nil
}

var _ Handler = (*Exec)(nil)

// execWaitDelay is how long Process still waits for the program's stdout and stderr to
// reach end of file once the program has exited, or once ctx has ended and its process
// group was killed. Only a process it left behind can hold them that long: a background
// child of a program that exited (sh -c 'daemon & echo hi'), or, after the kill, a
// grandchild that had left the group (setsid). Once the writers are gone the pipes drain in microseconds,
// so 1s is ample even on a loaded machine, and it is paid only by programs that leave
// such processes behind; it stays well under the default Config.AbandonGrace (5s), so a
// killed program's attempt ends with its own error rather than being abandoned.
const execWaitDelay = time.Second

// Process runs the program for one job.
//
// When the program exits, processes it left in the background are not killed (they
// may be meant to outlive it), but the attempt does not wait for them: whatever they
// write to stdout or stderr more than execWaitDelay after the exit is lost. When ctx
// ends, the program's whole process group is killed with SIGKILL.
func (e *Exec) Process(ctx context.Context, job *queue.Job) error {
	cmd := exec.CommandContext(ctx, e.Args[0], e.Args[1:]...)
	cmd.Stdin = bytes.NewReader(job.Payload)
	cmd.Env = append(os.Environ(), "JOB_ID="+job.ID, "JOB_TYPE="+job.Type,
		"JOB_QUEUE="+job.Queue, "JOB_ATTEMPT="+strconv.Itoa(job.Attempt), "JOB_PROGRESS_FD=3", "JOB_LIMIT_KEY="+job.LimitKey)
	if len(job.After) > 0 || !job.Batch.IsZero() {
		env, err := e.workflowEnv(ctx, job)
		if err != nil {
			return err
		}
		cmd.Env = append(cmd.Env, env...)
	}
	// Progress comes on a pipe at fd 3 (ExtraFiles[0]), read by one goroutine for the
	// program's life.
	progress, progressW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start %s: progress pipe: %w", e.Args[0], err)
	}
	defer progress.Close()
	cmd.ExtraFiles = []*os.File{progressW}
	stdout := &capped{max: MaxExecResult}
	stderr := &tail{max: MaxExecStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = execSysProcAttr() // own process group; on Linux, dies with the worker
	cmd.Cancel = func() error {
		// Only while the program is not reaped: its pid is the group's id, which the
		// system may give to another process once it is reaped and the group is empty.
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			return err // os.ErrProcessDone once reaped: nothing left to cancel
		}
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	}
	cmd.WaitDelay = execWaitDelay
	guard.ready()
	err = cmd.Start()
	progressW.Close() // the program holds its own copy: the pipe ends when it exits
	if err != nil {
		return fmt.Errorf("start %s: %w", e.Args[0], err)
	}
	pgid := cmd.Process.Pid
	guard.started(pgid) // killed with its group if the worker dies (execGuard)
	read := make(chan struct{})
	go func() {
		defer close(read)
		readProgress(ctx, progress)
	}()
	err = cmd.Wait()
	guard.reaped(pgid)
	// Its last lines are in the pipe: read them before the outcome (the latest wins), but
	// do not wait for a process it left behind that still holds the pipe.
	_ = progress.SetReadDeadline(time.Now().Add(progressDrain))
	<-read
	if errors.Is(err, exec.ErrWaitDelay) {
		// It exited 0 (a failure would be an ExitError, a kill the context's error) and
		// a process it left running still held its stdout or stderr.
		err = nil
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s killed: %w", e.Args[0], context.Cause(ctx))
	}
	if err == nil {
		SetResult(ctx, stdout.result())
		return nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == ExitRetry {
		return &retryRequested{msg: fmt.Sprintf("exit status %d: retry requested%s", ExitRetry, stderr.suffix())}
	}
	if errors.As(err, &exit) && (exit.ExitCode() == ExitSnooze || exit.ExitCode() == ExitPauseKey) {
		code, what := exit.ExitCode(), "snooze"
		if code == ExitPauseKey {
			what = "pause key"
		}
		d, line, ok := snoozeDelay(stdout.result())
		switch {
		case ok && code == ExitPauseKey:
			return PauseKey(d)
		case ok:
			return Snooze(d)
		case line != "":
			if len(line) > 64 {
				line = line[:64] + "..."
			}
			return fmt.Errorf("%s: exit status %d (%s) with %q as the last line of stdout, not a delay (\"30s\", \"5m\" or seconds, at most %s)%s",
				e.Args[0], code, what, line, time.Duration(math.MaxInt64).Truncate(time.Hour), stderr.suffix())
		}
		return fmt.Errorf("%s: exit status %d (%s) without a delay as the last line of stdout (\"30s\", \"5m\" or seconds)%s",
			e.Args[0], code, what, stderr.suffix())
	}
	return fmt.Errorf("%s: %w%s", e.Args[0], err, stderr.suffix())
}

// capped keeps the first max bytes written to it and counts the rest. It is not a
// bytes.Buffer, nor embeds one: exec copies a program's output with io.Copy, which would
// call the buffer's ReadFrom instead of Write and read all of it, uncapped.
type capped struct {
	buf   []byte
	max   int
	total int64
}

func (c *capped) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.max - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

// result is everything written if that fits in max bytes; otherwise the head of it
// followed by a line saying how much was kept, max bytes in all.
func (c *capped) result() []byte {
	if c.total <= int64(c.max) {
		return c.buf
	}
	const format = "\n[jobs: output truncated: first %d of %d bytes kept]\n"
	kept := c.max - len(fmt.Sprintf(format, c.max, c.total)) // kept < max: its note is no longer
	return fmt.Appendf(c.buf[:kept], format, kept, c.total)
}

// tail keeps the last max bytes written to it.
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) suffix() string {
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	return ": " + s
}

// snoozeDelay reads an ExitSnooze program's delay: the last line of its stdout, a Go
// duration or a number of seconds, positive. line is that last line, for the error when
// it is not one.
func snoozeDelay(stdout []byte) (d time.Duration, line string, ok bool) {
	line = strings.TrimSpace(string(stdout))
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = strings.TrimSpace(line[i+1:])
	}
	d, err := time.ParseDuration(line)
	if err != nil {
		secs, serr := strconv.ParseFloat(line, 64)
		if serr != nil || math.IsNaN(secs) || secs > (1<<62)/1e9 {
			return 0, line, false
		}
		d = time.Duration(secs * float64(time.Second))
	}
	return d, line, d >= 0 // 0: again at once, as Snooze(0) (snoozeFloor bounds a loop of them)
}

// workflowEnv is the environment of a workflow job: JOB_AFTER, JOB_DEPENDENCIES (with a
// Client) and JOB_BATCH.
func (e *Exec) workflowEnv(ctx context.Context, job *queue.Job) ([]string, error) {
	var env []string
	if !job.Batch.IsZero() {
		env = append(env, "JOB_BATCH="+job.Batch.String())
	}
	if len(job.After) == 0 {
		return env, nil
	}
	refs := make([]string, len(job.After))
	for i, r := range job.After {
		refs[i] = r.String()
	}
	env = append(env, "JOB_AFTER="+strings.Join(refs, " "))
	if e.Client == nil {
		return env, nil
	}
	deps, err := e.Client.Dependencies(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("read the job's dependencies: %w", err)
	}
	type dep struct {
		Queue   string `json:"queue"`
		ID      string `json:"id"`
		State   string `json:"state"`
		Result  string `json:"result,omitempty"`
		Base64  []byte `json:"result_base64,omitempty"`
		Omitted bool   `json:"result_omitted,omitempty"`
	}
	out := make([]dep, len(deps))
	size := 0
	for i, d := range deps {
		out[i] = dep{Queue: d.Queue, ID: d.ID, State: string(d.State)}
		size += len(d.Result)
	}
	for i, d := range deps {
		switch {
		case size > MaxExecDependencies && len(d.Result) > 0:
			out[i].Omitted = true
		case utf8.Valid(d.Result):
			out[i].Result = string(d.Result)
		default:
			out[i].Base64 = d.Result
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return append(env, "JOB_DEPENDENCIES="+string(b)), nil
}

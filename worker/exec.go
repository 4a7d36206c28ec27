package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jobs-dev/jobs/internal/shellwords"
	"github.com/jobs-dev/jobs/queue"
)

// ExitRetry is the exit code (EX_TEMPFAIL) by which an exec handler asks for a retry
// without reporting an error: the attempt still counts against max_retry.
const ExitRetry = 75

// Output limits of an exec handler: stdout beyond MaxExecResult is cut from the result;
// only the last MaxExecStderr bytes of stderr go into last_error.
const (
	MaxExecResult = 1 << 20
	MaxExecStderr = 4 << 10
)

// Exec is a Handler that runs a program for each job (`jobs worker --run TYPE=COMMAND`).
// The program gets the payload on stdin and JOB_ID, JOB_TYPE, JOB_QUEUE and JOB_ATTEMPT
// in its environment; it is run directly, never through a shell, so a payload can never
// be interpreted as shell code. Exit 0 succeeds with stdout as the job's result,
// ExitRetry (75) asks for a retry, anything else fails with the tail of stderr as the
// error. At the job's timeout the program's whole process group is killed.
type Exec struct {
	Args []string // program and arguments
}

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

// Process runs the program for one job.
func (e *Exec) Process(ctx context.Context, job *queue.Job) error {
	cmd := exec.Command(e.Args[0], e.Args[1:]...)
	cmd.Stdin = bytes.NewReader(job.Payload)
	cmd.Env = append(os.Environ(), "JOB_ID="+job.ID, "JOB_TYPE="+job.Type,
		"JOB_QUEUE="+job.Queue, "JOB_ATTEMPT="+strconv.Itoa(job.Attempt))
	stdout := &capped{max: MaxExecResult}
	stderr := &tail{max: MaxExecStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so a timeout kills what it started too (sh -c '...').
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", e.Args[0], err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-waited:
		case <-time.After(DefaultAbandonGrace): // a grandchild escaped the group and holds a pipe
		}
		return fmt.Errorf("%s killed: %w", e.Args[0], context.Cause(ctx))
	}
	if err == nil {
		SetResult(ctx, stdout.Bytes())
		return nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == ExitRetry {
		return &retryRequested{msg: fmt.Sprintf("exit status %d: retry requested%s", ExitRetry, stderr.suffix())}
	}
	return fmt.Errorf("%s: %w%s", e.Args[0], err, stderr.suffix())
}

// capped keeps the first max bytes written to it.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
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

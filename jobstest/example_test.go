package jobstest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jobs-dev/jobs/jobstest"
	"github.com/jobs-dev/jobs/queue"
	"github.com/jobs-dev/jobs/worker"
)

type Welcome struct {
	Email string `json:"email"`
}

func (Welcome) Kind() string { return "email:welcome" }

// signup is the application code under test: it enqueues a welcome email.
func signup(ctx context.Context, client *queue.Client, email string) error {
	_, err := client.EnqueueArgs(ctx, Welcome{Email: email}, queue.On("email"))
	return err
}

// In a test, t is the test's *testing.T: the body of TestSignup, which checks that
// signup enqueued the job and that the job's handler does its work.
func Example() {
	t := newExampleT() // in a test: func TestSignup(t *testing.T) {
	defer t.cleanup()

	ctx := context.Background()
	client := jobstest.NewClient(t, queue.Config{})
	if err := signup(ctx, client, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	jobstest.RequireEnqueuedArgs(t, client, "email", Welcome{Email: "ada@example.com"})

	mux := worker.NewMux()
	worker.HandleArgs(mux, func(ctx context.Context, job *queue.Job, w Welcome) error {
		worker.SetResult(ctx, []byte("sent to "+w.Email))
		return nil
	})
	jobs := jobstest.Drain(t, client, worker.Config{Handler: mux, Queues: map[string]int{"email": 1}})
	fmt.Println(len(jobs), jobs[0].State, string(jobs[0].Result))
	// Output: 1 done sent to ada@example.com
}

// exampleT stands in for the *testing.T an Example has not got.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func newExampleT() *exampleT                          { return &exampleT{} }
func (t *exampleT) Helper()                           {}
func (t *exampleT) Log(...any)                        {}
func (t *exampleT) Logf(string, ...any)               {}
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (t *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

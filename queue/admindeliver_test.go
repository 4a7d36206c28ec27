package queue

import "testing"

// An operator's cancel, purge or delete of a job that a job of another queue waits on
// resolves that dependent before the call returns, with no worker of the first queue:
// the outbox entry the call wrote waited for such a worker, forever when none ran (QA:
// `jobs cancel qa/A` left qb/B waiting).
func TestOperatorEndOfADependencyResolvesOtherQueuesAtOnce(t *testing.T) {
	c := setup(t, Config{})
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, q, id string)
	}{
		{"cancel", func(t *testing.T, q, id string) {
			if _, err := c.Cancel(ctx, q, id); err != nil {
				t.Fatal(err)
			}
		}},
		{"purge", func(t *testing.T, q, id string) {
			if n, err := c.Purge(ctx, q, StateReady); err != nil || n != 1 {
				t.Fatalf("Purge() = %d, %v", n, err)
			}
		}},
		{"delete", func(t *testing.T, q, id string) {
			if err := c.Delete(ctx, q, id); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		depQ, q := "od-"+tc.name, "ow-"+tc.name
		dep := mustEnqueue(t, c, "dep", On(depQ))
		d := mustEnqueue(t, c, "d", On(q), AfterJob(depQ, dep))
		tc.end(t, depQ, dep)
		j := mustState(t, c, q, d, StateDead)
		if want := "dependency " + depQ + "/" + dep + " died"; j.LastError != want {
			t.Errorf("%s: dependent's last error = %q, want %q", tc.name, j.LastError, want)
		}
	}
}

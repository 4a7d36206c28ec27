package main

import (
	"cmp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/proto"
)

// TestHelpShowsOneDefault: flags whose usage text named a default showed urfave/cli's
// zero value after it (limit set --burst "(default: 1) (default: 0)", cron add
// --max-retry "(default: 10) (default: 0)"). Every command's --help shows each flag's
// default once, and these the true one.
func TestHelpShowsOneDefault(t *testing.T) {
	t.Parallel()
	var paths [][]string
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(append([]string{}, prefix...), c.Name)
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(&env{}).Commands)
	helps := map[string]string{}
	for _, p := range append(paths, nil) {
		r := runCLI("", append(p, "--help")...)
		if r.code != 0 {
			t.Errorf("jobs %s --help = %+v", strings.Join(p, " "), r)
		}
		helps[strings.Join(p, " ")] = r.stdout
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.Count(line, "(default:") > 1 {
				t.Errorf("jobs %s --help: %q shows two defaults", strings.Join(p, " "), strings.TrimSpace(line))
			}
		}
	}
	for _, tc := range []struct{ cmd, flag, want string }{
		{"limit set", "--burst B", "(default: 1)"},
		{"limit set", "--key-burst B", "(default: 1)"},
		{"limit set", "--concurrency N", "(default: none)"},
		{"cron add", "--max-retry", "(default: 10)"},
		{"cron add", "--timeout", "(default: 30m0s)"},
		{"enqueue", "--max-retry", "(default: 10)"},
	} {
		found := false
		for _, line := range strings.Split(helps[tc.cmd], "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), tc.flag+" ") {
				found = true
				if !strings.HasSuffix(line, tc.want) {
					t.Errorf("jobs %s --help: %q, want it to end %q", tc.cmd, strings.TrimSpace(line), tc.want)
				}
			}
		}
		if !found {
			t.Errorf("jobs %s --help lacks %s", tc.cmd, tc.flag)
		}
	}
}

// TestHelpCommandAndGroups: `jobs help enqueue` said unknown command "help" while `jobs
// cron help` worked, and bare `jobs` exited 2 while bare `jobs cron` exited 0. jobs help
// COMMAND... prints that command's help; a command of subcommands given none, or an
// unknown one, prints its help and exits 2 as bare jobs does (a script's `jobs cron
// $CMD` with CMD empty must not pass for done).
func TestHelpCommandAndGroups(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // the help's first lines name this command
		stderr string
	}{
		{[]string{"help", "enqueue"}, 0, "jobs enqueue - add a job", ""},
		{[]string{"help", "cron", "add"}, 0, "jobs cron add - add or replace", ""},
		{[]string{"help"}, 0, "jobs - a Redis-only job system", ""},
		{[]string{"--help"}, 0, "jobs - a Redis-only job system", ""},
		{[]string{"cron", "help"}, 0, "jobs cron - add, list", ""},
		{[]string{"help", "nosuch"}, 2, "", "jobs: help: no command \"nosuch\"; see jobs --help\n"},
		{[]string{"help", "cron", "nosuch"}, 2, "", "jobs: help: no command \"cron nosuch\"; see jobs --help\n"},
		{[]string{}, 2, "jobs - a Redis-only job system", "jobs: no command given\n"},
		{[]string{"cron"}, 2, "jobs cron - add, list", "jobs: cron needs a command; see jobs cron --help\n"},
		{[]string{"limit"}, 2, "jobs limit - set, list", "jobs: limit needs a command; see jobs limit --help\n"},
		{[]string{"batch"}, 2, "jobs batch - batches", "jobs: batch needs a command; see jobs batch --help\n"},
		{[]string{"cron", "nosuch"}, 2, "", "jobs: cron: unknown command \"nosuch\"; see jobs cron --help\n"},
	} {
		r := runCLI("", tc.args...)
		if r.code != tc.code || r.stderr != tc.stderr || !strings.Contains(firstLines(r.stdout, 3), tc.stdout) {
			t.Errorf("jobs %q = exit %d, stdout %.120q, stderr %q; want exit %d, help of %q, stderr %q",
				tc.args, r.code, r.stdout, r.stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// TestVersion: jobs --version and jobs version print the main module's version, the
// string workers and schedulers report in jobs workers.
func TestVersion(t *testing.T) {
	t.Parallel()
	want := "jobs version " + cmp.Or(proto.Version(), "unknown") + "\n"
	for _, args := range [][]string{{"--version"}, {"version"}, {"-v"}} {
		if r := runCLI("", args...); r.code != 0 || r.stdout != want || r.stderr != "" {
			t.Errorf("jobs %q = %+v, want %q", args, r, want)
		}
	}
	if r := runCLI("", "version", "x"); r.code != 2 {
		t.Errorf("jobs version x = %+v, want exit 2", r)
	}
}

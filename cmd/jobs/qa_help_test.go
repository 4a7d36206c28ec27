package main

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
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

package main

import (
	"io"
	"strings"
	"testing"
)

func TestFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	p := "args" + strings.ReplaceAll(t.Name(), "/", "_")
	r := jobs(t, p, "", "enqueue", "t", "-1", "--queue", "late", "--max-retry", "0")
	if r.code != 0 {
		t.Fatalf("enqueue with trailing flags = %+v", r)
	}
	id := strings.TrimSpace(r.stdout)
	r = jobs(t, p, "", "inspect", id, "--json")
	if !strings.Contains(r.stdout, `"queue":"late"`) || !strings.Contains(r.stdout, `"payload":"-1"`) ||
		!strings.Contains(r.stdout, `"max_retry":0`) {
		t.Errorf("inspect = %q", r.stdout)
	}
	r = jobs(t, p, "", "enqueue", "t", "--", "--not-a-flag")
	id = strings.TrimSpace(r.stdout)
	if r = jobs(t, p, "", "inspect", "--json", id); !strings.Contains(r.stdout, `"payload":"--not-a-flag"`) {
		t.Errorf("payload after -- = %q", r.stdout)
	}
}

func TestHoistFlags(t *testing.T) {
	app := newApp(&env{stdout: io.Discard, stderr: io.Discard})
	cases := []struct{ in, want string }{
		{"jobs ls default --state dead", "jobs ls --state dead -- default"},
		{"jobs --prefix x ls q --json", "jobs --prefix x ls --json -- q"},
		{"jobs cron add n @hourly t --queue low", "jobs cron add --queue low -- n @hourly t"},
		{"jobs enqueue --delay 1s t", "jobs enqueue --delay 1s"},
		{"jobs nosuch a --b", "jobs nosuch a --b"},
		{"jobs", "jobs"},
	}
	for _, tc := range cases {
		args, err := hoistFlags(app, strings.Fields(tc.in))
		if err != nil {
			t.Errorf("hoistFlags(%q) err = %v", tc.in, err)
		}
		got := strings.Join(args, " ")
		want := tc.want
		if tc.in == "jobs enqueue --delay 1s t" {
			want = "jobs enqueue --delay 1s -- t"
		}
		if got != want {
			t.Errorf("hoistFlags(%q) = %q, want %q", tc.in, got, want)
		}
	}
}

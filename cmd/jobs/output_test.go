package main

import (
	"strings"
	"testing"
	"time"

	"github.com/jobs-dev/jobs/internal/redistest"
)

// TestHumanOutputEscapesControlBytes: inspect and ls printed payloads and handler stderr
// raw, so a job could clear or retitle the operator's terminal, and a 0xff byte (which
// text/tabwriter takes for its escape character) broke inspect's table.
func TestHumanOutputEscapesControlBytes(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	r := jobs(t, p, "", "enqueue", "t", "\x1b[2J\xffdata\tend")
	if r.code != 0 {
		t.Fatalf("enqueue = %+v", r)
	}
	out := jobs(t, p, "", "inspect", strings.TrimSpace(r.stdout)).stdout
	if strings.ContainsAny(out, "\x1b\t") || strings.Contains(out, "\xff") ||
		!strings.Contains(out, "payload     \\x1b[2J\\xffdata\\tend\n") || !strings.Contains(out, "\nresult      -\n") {
		t.Errorf("inspect printed:\n%q\nwant control bytes escaped and the table intact", out)
	}

	// A handler whose stderr carries escape sequences, over several lines.
	r = jobs(t, p, "", "enqueue", "--queue", "f", "--max-retry", "0", "fail")
	id := strings.TrimSpace(r.stdout)
	script := `printf '\033]0;pwned\007first line\nmiddle\nlast \033[2J words\n' >&2; exit 1`
	_, log := watchedProcess(t, p, "worker", "--queue", "f", "--run", "fail=sh -c \""+script+"\"")
	waitFor(t, 10*time.Second, "job dead", func() bool {
		return strings.Contains(jobs(t, p, "", "inspect", "--json", id).stdout, `"state":"dead"`)
	})
	out = jobs(t, p, "", "ls", "f", "--state", "dead").stdout
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("ls printed raw control bytes: %q", out)
	}
	// The last line of stderr says what went wrong; the first was shown.
	if !strings.Contains(out, `last \x1b[2J words`) || strings.Contains(out, "first line") {
		t.Errorf("ls shows %q, want the last line of stderr, escaped", out)
	}
	out = jobs(t, p, "", "inspect", id).stdout
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `\x1b]0;pwned\afirst line`) {
		t.Errorf("inspect printed %q, want the whole error with control bytes escaped", out)
	}
	t.Logf("worker log:\n%s", log)
}

// TestIDMustBeUTF8: JSON cannot hold bytes that are not UTF-8 (json.Marshal writes
// U+FFFD for them), so an ID such as "a\xffb" printed by --json could not be found
// again. The CLI refuses such an ID at enqueue; every ID it accepts round-trips.
func TestIDMustBeUTF8(t *testing.T) {
	t.Parallel()
	p := redistest.Prefix(t)
	r := jobs(t, p, "", "enqueue", "--id", "a\xffb", "t")
	if r.code != exitUsage || !strings.Contains(r.stderr, "UTF-8") || strings.Count(r.stderr, "\n") != 1 ||
		strings.Contains(r.stderr, "\xff") {
		t.Errorf("enqueue --id a\\xffb = %+v, want exit 2 and one line saying an ID must be UTF-8", r)
	}
}

// A time far from now prints with its date: a key paused for 1000h showed only a time of
// day, read as earlier today.
func TestClockShowsTheDateOfAFarTime(t *testing.T) {
	soon := time.Now().Add(time.Hour)
	if got, want := clock(soon), soon.UTC().Format("15:04:05.000"); got != want {
		t.Errorf("clock(in 1h) = %q, want %q", got, want)
	}
	far := time.Now().Add(1000 * time.Hour)
	if got := clock(far); got != when(far) || !strings.HasPrefix(got, far.UTC().Format("2006-01-02T")) {
		t.Errorf("clock(in 1000h) = %q, want %q", got, when(far))
	}
}

package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// jobs is also a bash builtin: a shell line in the docs that starts with a bare `jobs`
// runs the builtin, prints nothing useful and exits 0. Commands in the docs are
// `./jobs ...` (or `go run ./cmd/jobs ...`), so that a reader can type them as they are.
var bareJobs = regexp.MustCompile(`(^|[;&|(]\s*|\$\s+|\bdo\s+|\bthen\s+)jobs\s`)

func TestDocsNeverRunTheShellBuiltin(t *testing.T) {
	docs, _ := filepath.Glob("../../*.md")
	more, _ := filepath.Glob("../../docs/*.md")
	docs = append(docs, more...)
	if len(docs) == 0 {
		t.Fatal("no docs found from cmd/jobs")
	}
	for _, path := range docs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		shell := false
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if fence, ok := strings.CutPrefix(strings.TrimSpace(line), "```"); ok {
				if shell {
					shell = false
				} else {
					shell = fence == "sh" || fence == "bash" || fence == "shell" || fence == "console"
				}
				continue
			}
			if code, _, _ := strings.Cut(line, " #"); shell && bareJobs.MatchString(strings.TrimSpace(code)) {
				t.Errorf("%s:%d runs the shell's jobs builtin, not ours (write ./jobs): %s", filepath.Base(path), n, line)
			}
		}
		f.Close()
	}
}

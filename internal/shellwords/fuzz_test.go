package shellwords

import (
	"strings"
	"testing"
)

// FuzzSplit: any command line splits or fails cleanly; plain words round-trip.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{`sh -c 'echo "$1"'`, `a\ b "c\"d"`, `'unterminated`, `x \`, "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := Split(s)
		if err != nil {
			return
		}
		if !strings.ContainsAny(s, "'\"\\") { // blanks are space, tab and newline, as in sh's IFS
			want := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' })
			if strings.Join(words, "\x00") != strings.Join(want, "\x00") {
				t.Fatalf("Split(%q) = %q, want %q", s, words, want)
			}
		}
	})
}

package shellwords

import (
	"fmt"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  string
	}{
		{"echo hi", []string{"echo", "hi"}, ""},
		{"  a   b\tc ", []string{"a", "b", "c"}, ""},
		{`sh -c 'echo "$1" | wc'`, []string{"sh", "-c", `echo "$1" | wc`}, ""},
		{`a "b c" d`, []string{"a", "b c", "d"}, ""},
		{`a "x\"y\\z\n"`, []string{"a", `x"y\z\n`}, ""},
		{`a\ b c`, []string{"a b", "c"}, ""},
		{`a '' b`, []string{"a", "", "b"}, ""},
		{`pre'mid'"end"`, []string{"premidend"}, ""},
		{`$HOME *`, []string{"$HOME", "*"}, ""},
		{"", nil, ""},
		{`a 'b`, nil, "unterminated single quote"},
		{`a "b`, nil, "unterminated double quote"},
		{`a \`, nil, "lone backslash"},
	}
	for _, tc := range cases {
		got, err := Split(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Split(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

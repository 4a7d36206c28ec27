// Package printable shows text that users and handlers wrote (job types, payloads,
// errors, worker IDs) without letting it act on whatever displays it: the CLI's terminal
// and the dashboard's page both show the same escapes.
package printable

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes s safe to print on a terminal. Control characters, other runes that do
// not print (bidi overrides among them) and bytes that are not UTF-8 are written as Go
// escapes (\x1b, \t, \u202e, \xff), so a payload or a handler's stderr cannot move the
// cursor, clear the screen or retitle the window, and no 0xff byte reaches
// text/tabwriter, which takes it for its escape character. With keepNewlines a '\n' stays
// a line break (multi-line values show on several lines). Printable text, backslashes
// included, is kept as is: the JSON forms are the exact ones.
func Escape(s string, keepNewlines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && keepNewlines, unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\t', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

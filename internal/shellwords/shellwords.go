// Package shellwords splits a command line into words the way a POSIX shell does, without
// expanding anything. It serves `--run TYPE=COMMAND` and `--cron 'NAME SPEC TYPE'`.
package shellwords

import (
	"errors"
	"fmt"
	"strings"
)

// Split splits a command line into words as a POSIX shell does, without expanding
// anything: blanks separate words; 'single quotes' keep everything literally; "double
// quotes" keep everything but \" \\ \$ and \` escapes; a backslash outside quotes escapes
// the next character. Variables, globs, pipes and redirections are not interpreted: use
// `sh -c '...'` for those.
func Split(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\\':
			inWord = true
			if i+1 >= len(s) {
				return nil, errors.New("command ends with a lone backslash")
			}
			i++
			if s[i] != '\n' { // backslash-newline continues the line
				cur.WriteByte(s[i])
			}
		case c == '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated single quote at byte %d", i)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			inWord = true
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\"\\$`\n", s[j+1]) >= 0 {
					j++
					if s[j] == '\n' {
						continue
					}
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated double quote at byte %d", i)
			}
			i = j
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

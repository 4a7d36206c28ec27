// Package errtext picks the line of a job's last error that says most about it, for the
// places that show one line: `jobs ls` and the worker's log.
package errtext

import "strings"

// Summary is the one line of lastError that says most about it. An exec handler's error
// ends with its stderr's tail, whose last line is usually the program's own message
// ("error: disk full"), so that is the line; a panic's first line holds the panic value
// and the lines after it the stack, so there it is the first.
func Summary(lastError string) string {
	s := strings.TrimSpace(lastError)
	first, _, multi := strings.Cut(s, "\n")
	if !multi || strings.HasPrefix(s, "panic: ") {
		return first
	}
	return strings.TrimSpace(s[strings.LastIndexByte(s, '\n')+1:])
}

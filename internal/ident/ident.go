// Package ident names a process for logs and job records: host:pid:random, so two
// processes on one host, or one restarted with the same PID, never share a name.
package ident

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
)

// New returns "host:pid:xxxx" (xxxx: four random base-36 digits).
func New() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%s", cmp.Or(host, "localhost"), os.Getpid(),
		strconv.FormatUint(rand.Uint64()%(36*36*36*36), 36))
}

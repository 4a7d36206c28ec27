//go:build !linux

package worker

import "syscall"

// execSysProcAttr puts an exec handler's program in a process group of its own, so a kill
// reaches what it started too (sh -c '...'). Without Pdeathsig (Linux only), a worker
// killed with SIGKILL leaves its programs to its guard (execGuard), which kills their
// groups.
func execSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

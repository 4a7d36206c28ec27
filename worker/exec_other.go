//go:build !linux

package worker

import "syscall"

// execSysProcAttr puts an exec handler's program in a process group of its own, so a kill
// reaches what it started too (sh -c '...'). Unlike on Linux (Pdeathsig), the program
// keeps running if the worker is killed with SIGKILL.
func execSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

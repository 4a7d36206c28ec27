package worker

import "syscall"

// execSysProcAttr puts an exec handler's program in a process group of its own, so a kill
// reaches what it started too (sh -c '...'), and has the kernel SIGKILL it when the
// worker dies (Pdeathsig): a worker killed with SIGKILL must not leave it running, or the
// job would run twice at once once its lease expires and another worker claims it.
// Pdeathsig reaches the program only, not processes it starts: those die by the group
// kill of the worker's guard (execGuard).
//
// Pdeathsig fires when the thread that started the program exits, not only the process
// (go.dev/issue/27505). That is safe here: the Go runtime ends a thread only when a
// goroutine locked to it (runtime.LockOSThread) returns without unlocking, and neither
// this module nor its dependencies do that on Linux, so the thread lives as long as
// the worker. A program that embeds Exec and ends locked goroutines would see its exec
// jobs fail with "signal: killed" and be retried.
func execSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

package worker

import (
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
)

// execGuard kills the process groups of a worker's running programs when the worker
// dies, SIGKILL included: Pdeathsig (Linux) reaches a program itself but not what it
// started (sh -c 'slow-step; next-step' leaves slow-step running), and a program left
// running would go on with its job while another worker, its lease expired, runs it
// again. The guard is one /bin/sh per worker process, started with the first program, in
// a process group of its own (an operator's ^C to the worker's group, or a kill of a
// program's group, does not reach it). It reads "+ PGID" and "- PGID" lines on its
// stdin as programs start and are reaped; when the worker dies, however it dies, the
// kernel closes the pipe, and at end of file the guard SIGKILLs the groups still listed
// and exits. A process that left its group (setsid) escapes it, as it escapes a
// cancel's kill.
type execGuard struct {
	mu   sync.Mutex
	in   io.WriteCloser // the guard's stdin; nil while no guard runs
	live map[int]bool   // the groups of the programs running now
}

var guard = execGuard{live: map[int]bool{}}

// guardScript is the guard: plain POSIX sh (dash's kill takes no "--").
const guardScript = `groups=
while read -r op g; do
  case $op in
    +) groups="$groups $g" ;;
    -) n=; for x in $groups; do [ "$x" = "$g" ] || n="$n $x"; done; groups=$n ;;
  esac
done
for g in $groups; do kill -9 -"$g" 2>/dev/null; done
`

// ready starts the guard if none runs, before a program starts: started then only
// writes a line, and the time a program runs before its guard knows its group is that
// write's, not a /bin/sh's start too (a worker SIGKILLed then left the program's children
// running: TestExecGrandchildDiesWithWorker, under load).
func (g *execGuard) ready() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.in == nil {
		_ = g.startLocked() // none: started tries again, and a program runs unguarded
	}
}

// started lists pgid, the group of a program just started.
func (g *execGuard) started(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.live[pgid] = true
	if g.in == nil && g.startLocked() != nil {
		return // no guard: the program runs unguarded, as before there was one
	}
	g.sendLocked('+', pgid)
}

// reaped takes pgid off the list once its program was reaped: from then on the system
// may give the number to another group, which the guard must never kill.
func (g *execGuard) reaped(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.live, pgid)
	if g.in != nil {
		g.sendLocked('-', pgid)
	}
}

// startLocked starts a guard and tells it the groups running now (a guard that died,
// killed by someone, is replaced at the next program's start). g.mu is held.
func (g *execGuard) startLocked() error {
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reaped if it exits while the worker lives
	g.in = in
	for pgid := range g.live {
		g.sendLocked('+', pgid)
	}
	return nil
}

// sendLocked writes one line to the guard; a guard that is gone is forgotten. g.mu is
// held.
func (g *execGuard) sendLocked(op byte, pgid int) {
	if g.in == nil {
		return
	}
	if _, err := fmt.Fprintf(g.in, "%c %d\n", op, pgid); err != nil {
		_ = g.in.Close()
		g.in = nil
	}
}

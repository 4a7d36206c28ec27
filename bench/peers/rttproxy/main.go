// rttproxy is a TCP proxy for benchmarks that delays every byte by a fixed time in each
// direction, so that a request and its reply cost 2 x delay more, as if the server were on
// another host. bench/compare-peers with RTT_MS=N puts one in front of redis-server and one in
// front of PostgreSQL, each with -delay N/2 ms.
//
//	rttproxy -listen 127.0.0.1:7001 -target 127.0.0.1:6379 -delay 500us
//
// Each direction of each connection is a delay line, not a request/reply relay: a chunk
// read from one side is written to the other side delay after it was read, whatever else is
// in flight, so pipelined commands and long replies stream as on a real link (latency is
// added, bandwidth is not limited) and bytes keep their order. The end of a direction (EOF)
// is passed on delay later too, as a half close. Idle connections (BLPOP, BZPOPMIN, LISTEN)
// are never timed out. Connecting is not delayed (a real connect costs one round trip more;
// pools connect once). The copies cost CPU on this host, as a real network's would not.
//
// Timing: Go's timers sleep whole milliseconds on Linux when the process is idle (a 500 µs
// time.Sleep takes ~1.1 ms), so one goroutine on its own OS thread releases every chunk,
// sleeping with nanosleep(2), timer slack 1 ns, until the oldest is due (less its running
// estimate of how late such sleeps end), and writes it straight to its socket when that
// does not have to wait. Chunks are released in the order they were read, which with one
// fixed delay is the order they fall due; on a quiet 2-CPU VM, within ~10 µs of due at the
// median and 100 µs at p99. What the proxy itself adds on top, as any user-space proxy
// does (two more sockets and wake-ups per round trip), was ~0.1 ms a round trip there:
// PING's median went from 0.03 ms direct to 1.11-1.15 ms with -delay 500us.
//
// On SIGTERM or SIGINT it stops accepting, closes every connection, prints to stderr how
// many connections and chunks it passed and how late past their due time chunks were
// released (a loaded CPU shows there), and exits 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to accept on")
	target := flag.String("target", "", "address to connect each accepted connection to")
	delay := flag.Duration("delay", 0, "added to each direction (a round trip costs twice this)")
	flag.Parse()
	if *target == "" || *delay < 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: rttproxy -listen 127.0.0.1:PORT -target 127.0.0.1:PORT -delay DURATION")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rttproxy:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	p := newProxy(*target, *delay, os.Stderr)
	fmt.Fprintf(os.Stderr, "rttproxy: %s -> %s, +%v each way\n", ln.Addr(), *target, *delay)
	go func() { <-ctx.Done(); ln.Close() }()
	p.serve(ln)
	clean := p.shutdown(5 * time.Second)
	fmt.Fprintf(os.Stderr, "rttproxy: %s -> %s: %d connections, %v%s\n", ln.Addr(), *target,
		p.count.Load(), &p.line.stats, map[bool]string{true: "", false: " (some still open after 5s)"}[clean])
}

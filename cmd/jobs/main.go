// Command jobs enqueues, runs and inspects jobs stored in Redis. `jobs --help` lists the
// commands; README.md shows them at work.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

func main() {
	// go-redis logs dial failures itself; the CLI reports errors once, on one line.
	redis.SetLogger(discardLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

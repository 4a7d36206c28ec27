package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	webdash "github.com/jobs-dev/jobs/dash"
	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

// defaultDashAddr is where `jobs dash` listens unless told otherwise: loopback only.
const defaultDashAddr = "127.0.0.1:7420"

func dashCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "dash",
		Usage: "serve the web dashboard: queues, jobs, workers, actions, audit log",
		Description: "Listens on loopback unless told otherwise; any other --listen address needs --auth\n" +
			"(HTTP basic auth). Loopback is judged by IP: \":7420\" and \"0.0.0.0:7420\" are not, a host\n" +
			"name is when every address it resolves to is. --read-only refuses every action (HTTP 403) however it is sent.\n" +
			"Every page also answers Accept: application/json with the --json data. Examples:\n\n" +
			"   jobs dash                                  # http://127.0.0.1:7420/\n" +
			"   JOBS_DASH_AUTH=ops:s3cret jobs dash --listen 0.0.0.0:7420 --read-only",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: defaultDashAddr, Usage: "`ADDR` to serve on (127.0.0.1:0 for any free port)"},
			&cli.BoolFlag{Name: "read-only", Usage: "show everything, change nothing"},
			&cli.StringFlag{Name: "auth", EnvVars: []string{"JOBS_DASH_AUTH"}, Usage: "`USER:PASS` required by HTTP basic auth"},
			&cli.StringFlag{Name: "base-path", Usage: "serve under this `PATH` (e.g. /jobs, behind a proxy)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("dash takes no arguments, got %q", c.Args().First())
			}
			opts := webdash.Options{ReadOnly: c.Bool("read-only"), BasePath: c.String("base-path"),
				Logger: slog.New(slog.NewTextHandler(e.stderr, nil))}
			listen, err := dashAuth(c.Context, c.String("auth"), c.String("listen"), &opts)
			if err != nil {
				return err
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			url, stop, err := serveDash(listen, client, opts)
			if err != nil {
				return err
			}
			defer stop()
			mode := ""
			if opts.ReadOnly {
				mode = " (read-only)"
			}
			fmt.Fprintf(e.stderr, "jobs dash: serving %s%s; Ctrl-C stops\n", url, mode)
			<-c.Context.Done()
			return nil
		},
	}
}

// lookupIPAddr resolves --listen's host name; tests replace it to give a name addresses
// this machine's resolver would not.
var lookupIPAddr = net.DefaultResolver.LookupIPAddr

// dashAuth sets opts.Authorize from --auth USER:PASS, and refuses to serve a
// non-loopback address without it: a dashboard that can purge queues is not left open to
// a network by accident. It returns the address to listen on.
//
// Without auth, loopback is judged by loopbackAddr.
func dashAuth(ctx context.Context, auth, listen string, opts *webdash.Options) (string, error) {
	if _, _, err := splitListen(listen); err != nil {
		return "", usagef("--listen %q: %v", listen, err)
	}
	if auth != "" {
		user, pass, ok := strings.Cut(auth, ":")
		if !ok || user == "" || pass == "" {
			return "", usagef("--auth: want USER:PASS, both non-empty")
		}
		opts.Authorize = webdash.BasicAuth(user, pass)
		return listen, nil
	}
	addr, why, err := loopbackAddr(ctx, listen)
	if err != nil {
		return "", usagef("--listen %q: %v", listen, err)
	}
	if why != "" {
		return "", usagef("--listen %s %s: give --auth USER:PASS (or JOBS_DASH_AUTH) to serve beyond this machine", listen, why)
	}
	return addr, nil
}

// splitListen splits a HOST:PORT to listen on, the port a number from 0 to 65535 (0 or
// none: any free one), so a bad one is a usage error, not a failure to listen.
func splitListen(listen string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(listen)
	if err != nil {
		return "", "", fmt.Errorf("want HOST:PORT (%v)", err)
	}
	if n, err := strconv.Atoi(port); port != "" && (err != nil || n < 0 || n > 65535) {
		return "", "", fmt.Errorf("port %q: want a number from 0 to 65535", port)
	}
	return host, port, nil
}

// loopbackAddr judges whether listen (HOST:PORT) is a loopback address, by IP: an empty
// host (":7420", every interface) or an unspecified one (0.0.0.0, ::) is not, and a host
// name counts only if every address it resolves to is loopback; the address to listen on
// is then the first of them, so a name that resolves otherwise by the time the caller
// listens cannot widen it. why says why listen is not loopback ("": it is); err is a
// malformed listen.
func loopbackAddr(ctx context.Context, listen string) (addr, why string, err error) {
	host, port, err := splitListen(listen)
	if err != nil {
		return "", "", err
	}
	if host == "" {
		return "", "is not a loopback address (no host: every interface)", nil
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return "", "is not a loopback address", nil
		}
		return listen, "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := lookupIPAddr(ctx, host)
	if err != nil {
		return "", fmt.Sprintf("is not a loopback address (%s does not resolve: %v)", host, err), nil
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return "", fmt.Sprintf("is not a loopback address (%s resolves to %s)", host, a.IP), nil
		}
	}
	if len(addrs) == 0 {
		return "", fmt.Sprintf("is not a loopback address (%s resolves to nothing)", host), nil
	}
	return net.JoinHostPort(addrs[0].IP.String(), port), "", nil
}

// serveDash listens on addr at once (a taken port fails the command) and serves the
// dashboard until stop is called. It returns the dashboard's URL.
func serveDash(addr string, client *queue.Client, opts webdash.Options) (url string, stop func(), err error) {
	h, err := webdash.New(client, opts)
	if err != nil {
		return "", nil, usagef("%v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("dashboard: cannot listen on %s: %w", addr, err)
	}
	// Requests' contexts end when stop is called, so the live streams (/live), which
	// never go idle, end at once instead of holding up Shutdown.
	base, cancelBase := context.WithCancel(context.Background())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second,
		BaseContext: func(net.Listener) context.Context { return base }}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			opts.Logger.Error("dashboard stopped", slog.String("error", err.Error()))
		}
	}()
	// A dashboard on every interface (0.0.0.0, [::]) is printed as its loopback URL,
	// which works on this machine.
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + opts.BasePath + "/", func() {
		cancelBase()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

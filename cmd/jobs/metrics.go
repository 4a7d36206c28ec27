package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

var metricsFlag = &cli.StringFlag{Name: "metrics", Usage: "serve Prometheus /metrics and /healthz on ADDR (a bare port binds 127.0.0.1)"}

// metricsAddr makes a bare port ("9090" or ":9090") a loopback address: metrics are not
// published to the network unless an interface is named.
func metricsAddr(addr string) string {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// newRegistry is the CLI's own registry (never the global one), with Go and process
// metrics.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveMetrics listens on addr at once (so a taken port fails the command) and serves
// /metrics from reg and /healthz from health until the returned stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, health func(context.Context) error, log *slog.Logger) (stop func(), err error) {
	addr = metricsAddr(addr)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := health(ctx); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", slog.String("error", err.Error()))
		}
	}()
	log.Info("serving metrics", slog.String("addr", "http://"+ln.Addr().String()+"/metrics"))
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// startMetrics serves /metrics and /healthz (Redis PING) on addr for --metrics, and returns
// the registry to give the worker or scheduler. With no addr it returns a nil Registerer
// (no metrics) and a no-op stop.
func startMetrics(addr string, client *queue.Client, log *slog.Logger) (prometheus.Registerer, func(), error) {
	if addr == "" {
		return nil, func() {}, nil
	}
	reg := newRegistry()
	stop, err := serveMetrics(addr, reg, func(ctx context.Context) error {
		return broker.Of(client).Redis().Ping(ctx).Err()
	}, log)
	if err != nil {
		return nil, nil, err
	}
	return reg, stop, nil
}

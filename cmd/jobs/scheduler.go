package main

import (
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/cron"
	"github.com/jobs-dev/jobs/internal/broker"
)

func schedulerCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "scheduler",
		Usage: "fire cron entries until SIGTERM/SIGINT; run as many as you like",
		Description: "Fires every --cron entry plus the dynamic entries of `jobs cron add`, each tick\n" +
			"exactly once however many schedulers run (they race for a lock per tick, and the job\n" +
			"ID is derived from the tick). Changes to dynamic entries apply within a second.\n" +
			"SPEC: six fields with seconds, five without, @every 5s, @hourly, ..., in UTC unless\n" +
			"prefixed CRON_TZ=Area/City. Quote it. Examples:\n\n" +
			"   jobs scheduler --cron \"nightly '0 0 3 * * *' report\"\n" +
			"   jobs scheduler --cron \"ping '@every 10s' healthcheck '{\\\"url\\\":\\\"/\\\"}'\"",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "cron", Usage: "'NAME SPEC TYPE [PAYLOAD]': a static entry (repeatable)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			beatFlag,
			metricsFlag,
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("scheduler takes no arguments (entries go in --cron), got %q", c.Args().First())
			}
			entries, err := parseCrons(c.StringSlice("cron"))
			if err != nil {
				return err
			}
			if err := checkBeat(c); err != nil {
				return err
			}
			logger, err := newLogger(e, c.String("log-level"))
			if err != nil {
				return err
			}
			client, err := connect(c)
			if err != nil {
				return err
			}
			defer broker.Of(client).Redis().Close()
			reg, stop, err := startMetrics(c.String("metrics"), client, logger)
			if err != nil {
				return err
			}
			defer stop()
			s, err := cron.New(client, cron.Config{Entries: entries, Logger: logger, Registerer: reg, Beat: c.Duration("beat")})
			if err != nil {
				return usagef("%v", err)
			}
			return s.Run(c.Context)
		},
	}
}

// newLogger returns the text logger on stderr of --log-level.
func newLogger(e *env, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: l})), nil
}

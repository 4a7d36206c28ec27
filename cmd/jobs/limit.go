package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/broker"
	"github.com/jobs-dev/jobs/queue"
)

func limitCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "limit",
		Usage: "set, list and remove a queue's concurrency and rate limits, obeyed by every worker",
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "set limits of a queue (those not given are kept); workers apply them at their next claim",
				ArgsUsage: "QUEUE",
				Description: "--concurrency N: at most N of the queue's jobs run at once, across all workers\n" +
					"(jobs a worker claimed ahead count; a dead worker's slots return when its leases expire).\n" +
					"--rate N/PERIOD: at most N job starts (retries included) per PERIOD, evenly spaced;\n" +
					"with --burst B, up to B at once and at most N+B-1 in any PERIOD (GCRA). A claim takes\n" +
					"the tokens due within 20ms and each job starts at its token's instant, so the rate is\n" +
					"delivered in full (1000/s: 999/s measured).\n" +
					"PERIOD is a duration (500ms, 10s, 1m) or a unit (s, m, h).\n" +
					"--key-concurrency and --key-rate (--key-burst) are the same for the jobs of each limit key\n" +
					"(jobs enqueue --limit-key K) on its own: the default of every key, or with --key K (repeatable)\n" +
					"those keys' own limits. Keys are served round-robin: a key held back by its limits holds back\n" +
					"no other key and no job without a key. Examples:\n\n" +
					"   jobs limit set exports --concurrency 5\n" +
					"   jobs limit set payments --rate 100/s --burst 20\n" +
					"   jobs limit set emails --key-concurrency 1 --key-rate 10/m\n" +
					"   jobs limit set emails --key-concurrency 5 --key customer:42",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "concurrency", DefaultText: "none", Usage: "at most `N` jobs of the queue running at once"},
					&cli.StringFlag{Name: "rate", Usage: "at most `N/PERIOD` job starts, such as 20/s or 1000/1m"},
					&cli.IntFlag{Name: "burst", DefaultText: "1", Usage: "with --rate, up to `B` starts at once"},
					&cli.IntFlag{Name: "key-concurrency", DefaultText: "none", Usage: "at most `N` jobs of each limit key running at once"},
					&cli.StringFlag{Name: "key-rate", Usage: "at most `N/PERIOD` job starts of each limit key"},
					&cli.IntFlag{Name: "key-burst", DefaultText: "1", Usage: "with --key-rate, up to `B` starts of a key at once"},
					&cli.StringSliceFlag{Name: "key", Usage: "set the key limits of limit key `K` only (repeatable), not the default of every key"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("limit set takes one queue name, got %d arguments", c.NArg())
					}
					var l queue.Limit
					var err error
					l.Concurrency, l.Rate, l.Period, l.Burst, err = limitFlags(c, "", "--concurrency")
					if err != nil {
						return err
					}
					l.KeyConcurrency, l.KeyRate, l.KeyPeriod, l.KeyBurst, err = limitFlags(c, "key-", "--keys")
					if err != nil {
						return err
					}
					if l == (queue.Limit{}) {
						return usagef("limit set needs --concurrency, --rate, --key-concurrency or --key-rate")
					}
					keys := c.StringSlice("key")
					if len(keys) > 0 && (l.Concurrency != 0 || l.Rate != 0) {
						return usagef("--key sets key limits only: give --key-concurrency or --key-rate, not --concurrency or --rate")
					}
					if len(keys) > 0 && l.KeyConcurrency == 0 && l.KeyRate == 0 {
						return usagef("--key needs --key-concurrency or --key-rate")
					}
					client, err := connect(c)
					if err != nil {
						return err
					}
					defer broker.Of(client).Redis().Close()
					if len(keys) > 0 {
						err = client.SetKeyLimit(c.Context, c.Args().First(), l, keys...)
					} else {
						err = client.SetLimit(c.Context, c.Args().First(), l)
					}
					if errors.Is(err, queue.ErrInvalid) {
						return usagef("%v", err)
					}
					return err
				},
			},
			{
				Name:  "ls",
				Usage: "list the queues' limits, running jobs, and what each waits on",
				Description: "RUNNING counts the queue's unexpired leases (what --concurrency counts). WAITING says\n" +
					"which limit holds its ready jobs back now, and UNTIL when the next may start at the latest.\n" +
					"KEYS counts the limit keys with jobs ready. Below, each queue with key limits lists them:\n" +
					"KEY * is the default of every key, then the keys with their own and the next keys the claims\n" +
					"serve, with their running count and when each is DUE to be served.\n" +
					"Examples:\n\n   jobs limit ls\n   jobs limit ls --json | jq '.[] | select(.waiting != \"\")'",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array"}},
				Action: func(c *cli.Context) error {
					if c.NArg() > 0 {
						return usagef("limit ls takes no arguments, got %d", c.NArg())
					}
					client, err := connect(c)
					if err != nil {
						return err
					}
					defer broker.Of(client).Redis().Close()
					ls, err := client.Limits(c.Context)
					if err != nil {
						return err
					}
					if c.Bool("json") {
						rows := make([]limitRow, len(ls))
						for i, s := range ls {
							rows[i] = newLimitRow(s)
						}
						return printJSON(e.stdout, rows)
					}
					tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "QUEUE\tCONCURRENCY\tRATE\tBURST\tRUNNING\tKEYS\tWAITING\tUNTIL")
					for _, s := range ls {
						conc, rate, burst, until := "-", "-", "-", "-"
						if s.Concurrency > 0 {
							conc = fmt.Sprint(s.Concurrency)
						}
						if s.Rate > 0 {
							rate, burst = fmt.Sprintf("%d/%s", s.Rate, s.Period), fmt.Sprint(s.Burst)
						}
						if u := s.Until(); !u.IsZero() {
							until = clock(u)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", s.Queue, conc, rate, burst, s.Running,
							s.KeysWaiting, dash(string(s.Waiting())), until)
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					return printKeyLimits(e, ls)
				},
			},
			{
				Name:        "rm",
				Usage:       "remove a queue's limits (all, or those named); workers apply it at their next claim",
				ArgsUsage:   "QUEUE",
				Description: "Examples:\n\n   jobs limit rm exports\n   jobs limit rm payments --rate\n   jobs limit rm emails --key customer:42",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "concurrency", Usage: "remove only the concurrency limit"},
					&cli.BoolFlag{Name: "rate", Usage: "remove only the rate limit"},
					&cli.BoolFlag{Name: "keys", Usage: "remove only the key limits (the default of every key and the keys' own)"},
					&cli.StringSliceFlag{Name: "key", Usage: "remove only limit key `K`'s own limits (repeatable): it obeys the default again"},
				},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usagef("limit rm takes one queue name, got %d arguments", c.NArg())
					}
					var kinds []queue.LimitKind
					if c.Bool("concurrency") {
						kinds = append(kinds, queue.ConcurrencyLimit)
					}
					if c.Bool("rate") {
						kinds = append(kinds, queue.RateLimit)
					}
					if c.Bool("keys") {
						kinds = append(kinds, queue.KeyLimit)
					}
					keys := c.StringSlice("key")
					if len(keys) > 0 && len(kinds) > 0 {
						return usagef("--key removes keys' own limits only: give it alone")
					}
					client, err := connect(c)
					if err != nil {
						return err
					}
					defer broker.Of(client).Redis().Close()
					q := c.Args().First()
					missing, err := limitsMissing(c, client, q, kinds, keys)
					if errors.Is(err, queue.ErrInvalid) {
						return usagef("%v", err)
					}
					if err != nil {
						return err
					}
					if len(keys) == 0 && missing != "" {
						return errors.New(missing) // a typo in the queue name must not pass for done
					}
					if len(keys) > 0 {
						err = client.RemoveKeyLimit(c.Context, q, keys...)
					} else {
						err = client.RemoveLimit(c.Context, q, kinds...)
					}
					if errors.Is(err, queue.ErrInvalid) {
						return usagef("%v", err)
					}
					if err == nil && missing != "" {
						err = errors.New(missing)
					}
					return err
				},
			},
		},
	}
}

// limitRow is one queue of `jobs limit ls --json`: times in RFC 3339 (UTC), absent when
// there is none.
type limitRow struct {
	Queue       string     `json:"queue"`
	Concurrency int        `json:"concurrency"`
	Rate        int        `json:"rate"`
	PeriodMS    int64      `json:"period_ms"`
	Burst       int        `json:"burst"`
	Running     int        `json:"running"`
	Waiting     string     `json:"waiting"` // "concurrency", "rate" or ""
	Until       *time.Time `json:"until,omitempty"`
	NextSlot    *time.Time `json:"next_slot,omitempty"`
	NextToken   *time.Time `json:"next_token,omitempty"`
	// The default limits of every limit key (0: none), the keys with jobs ready, and the
	// keys listed (see queue.LimitStatus.Keys).
	KeyConcurrency int      `json:"key_concurrency"`
	KeyRate        int      `json:"key_rate"`
	KeyPeriodMS    int64    `json:"key_period_ms"`
	KeyBurst       int      `json:"key_burst"`
	KeysWaiting    int      `json:"keys_waiting"`
	Keys           []keyRow `json:"keys"`
}

// keyRow is one limit key of a limitRow.
type keyRow struct {
	Key         string     `json:"key"`
	Own         bool       `json:"own"` // its own limits, not the default
	Concurrency int        `json:"concurrency"`
	Rate        int        `json:"rate"`
	PeriodMS    int64      `json:"period_ms"`
	Burst       int        `json:"burst"`
	Running     int        `json:"running"`
	Ready       bool       `json:"ready"`
	Due         *time.Time `json:"due,omitempty"`
	NextSlot    *time.Time `json:"next_slot,omitempty"`
	NextToken   *time.Time `json:"next_token,omitempty"`
}

func newLimitRow(s queue.LimitStatus) limitRow {
	r := limitRow{Queue: s.Queue, Concurrency: s.Concurrency, Rate: s.Rate, PeriodMS: s.Period.Milliseconds(),
		Burst: s.Burst, Running: s.Running, Waiting: string(s.Waiting()), Until: optTime(s.Until()),
		NextSlot: optTime(s.NextSlot), NextToken: optTime(s.NextToken),
		KeyConcurrency: s.KeyConcurrency, KeyRate: s.KeyRate, KeyPeriodMS: s.KeyPeriod.Milliseconds(),
		KeyBurst: s.KeyBurst, KeysWaiting: s.KeysWaiting, Keys: []keyRow{}}
	for _, k := range s.Keys {
		r.Keys = append(r.Keys, keyRow{Key: k.Key, Own: k.Own, Concurrency: k.KeyConcurrency, Rate: k.KeyRate,
			PeriodMS: k.KeyPeriod.Milliseconds(), Burst: k.KeyBurst, Running: k.Running, Ready: k.Ready,
			Due: optTime(k.Due), NextSlot: optTime(k.NextSlot), NextToken: optTime(k.NextToken)})
	}
	return r
}

// optTime is t in UTC for JSON, nil (absent) when zero.
func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// limitFlags reads `jobs limit set`'s --concurrency, --rate and --burst, or with prefix
// "key-" the same for every limit key; rm names the `jobs limit rm` flag that removes them.
func limitFlags(c *cli.Context, prefix, rm string) (conc, rate int, period time.Duration, burst int, err error) {
	if c.IsSet(prefix + "concurrency") {
		if conc = c.Int(prefix + "concurrency"); conc <= 0 {
			return 0, 0, 0, 0, usagef("--%sconcurrency must be a positive integer, got %d (jobs limit rm %s removes it)", prefix, conc, rm)
		}
	}
	if c.IsSet(prefix + "rate") {
		v := c.String(prefix + "rate")
		if rate, period, err = queue.ParseRate(v); err != nil {
			return 0, 0, 0, 0, usagef("--%srate %q: %s", prefix, v, rateProblem(v))
		}
	}
	if c.IsSet(prefix + "burst") {
		if !c.IsSet(prefix + "rate") {
			return 0, 0, 0, 0, usagef("--%sburst needs --%srate (the burst belongs to a rate)", prefix, prefix)
		}
		if burst = c.Int(prefix + "burst"); burst <= 0 {
			return 0, 0, 0, 0, usagef("--%sburst must be a positive integer, got %d", prefix, burst)
		}
	}
	return conc, rate, period, burst, nil
}

// printKeyLimits writes the key limits of the queues that have any, or keys waiting: KEY *
// is the default of every key.
func printKeyLimits(e *env, ls []queue.LimitStatus) error {
	var rows [][]string
	lim := func(conc, rate int, period time.Duration, burst int) (string, string, string) {
		c, r, b := "-", "-", "-"
		if conc > 0 {
			c = fmt.Sprint(conc)
		}
		if rate > 0 {
			r, b = fmt.Sprintf("%d/%s", rate, period), fmt.Sprint(max(burst, 1))
		}
		return c, r, b
	}
	for _, s := range ls {
		if s.KeyConcurrency == 0 && s.KeyRate == 0 && len(s.Keys) == 0 {
			continue
		}
		c, r, b := lim(s.KeyConcurrency, s.KeyRate, s.KeyPeriod, s.KeyBurst)
		rows = append(rows, []string{s.Queue, "*", c, r, b, "-", "-"})
		for _, k := range s.Keys {
			c, r, b := lim(k.KeyConcurrency, k.KeyRate, k.KeyPeriod, k.KeyBurst)
			due := "-"
			if k.Ready {
				due = clock(k.Due)
			}
			rows = append(rows, []string{s.Queue, k.Key, c, r, b, fmt.Sprint(k.Running), due})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tKEY\tCONCURRENCY\tRATE\tBURST\tRUNNING\tDUE")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// limitsMissing says which of the limits `jobs limit rm` was asked to remove queue q does
// not have ("" when it has them all): with keys, the keys without limits of their own;
// without, the queue has none of kinds (all kinds when none is named). The removal that
// follows is its own call: a limit set in between is removed without being reported.
func limitsMissing(c *cli.Context, client *queue.Client, q string, kinds []queue.LimitKind, keys []string) (string, error) {
	st, err := client.KeyLimits(c.Context, q, keys...)
	if err != nil {
		return "", err
	}
	own, anyOwn := map[string]bool{}, false
	for _, k := range st.Keys {
		own[k.Key] = own[k.Key] || k.Own
		anyOwn = anyOwn || k.Own
	}
	if len(keys) > 0 {
		var none []string
		for _, k := range keys {
			if !own[k] {
				none = append(none, clean(k, false))
			}
		}
		if len(none) == 0 {
			return "", nil
		}
		removed := "nothing to remove"
		if len(none) < len(keys) {
			removed = "the other keys' limits were removed"
		}
		return fmt.Sprintf("queue %s: limit key %s has no limits of its own: %s", q, strings.Join(none, ", "), removed), nil
	}
	has := map[queue.LimitKind]bool{
		queue.ConcurrencyLimit: st.Concurrency > 0,
		queue.RateLimit:        st.Rate > 0,
		queue.KeyLimit:         st.KeyConcurrency > 0 || st.KeyRate > 0 || anyOwn,
	}
	if len(kinds) == 0 {
		kinds = []queue.LimitKind{queue.ConcurrencyLimit, queue.RateLimit, queue.KeyLimit}
	}
	for _, k := range kinds {
		if has[k] {
			return "", nil
		}
	}
	if len(kinds) == 3 {
		return fmt.Sprintf("queue %s has no limits: nothing to remove", q), nil
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return fmt.Sprintf("queue %s has no %s limit: nothing to remove", q, strings.Join(names, " or ")), nil
}

// rateProblem says what is wrong with a --rate that queue.ParseRate refused, in the
// words typed: its own message names the period as it parsed it ("1x" for "x").
func rateProblem(v string) string {
	num, per, ok := strings.Cut(v, "/")
	if !ok {
		return "want N/PERIOD, such as 20/s or 100/1m"
	}
	if n, err := strconv.Atoi(strings.TrimSpace(num)); err != nil || n <= 0 {
		return fmt.Sprintf("the count %q must be a positive integer", num)
	}
	return fmt.Sprintf("the period %q must be a positive duration such as s, 10s or 500ms", per)
}

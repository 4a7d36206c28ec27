package main

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/jobs-dev/jobs/internal/proto"
)

// groupAction runs when a command of subcommands (jobs cron) is given none, or an unknown
// one: its help and a usage error (exit 2), as bare jobs does. urfave/cli's default shows
// the help and exits 0, so `jobs cron $CMD` with CMD empty would pass for done; and an
// unknown word said "No help topic" and exited 1.
func groupAction(path string) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() > 0 {
			return usagef("%s: unknown command %q; see jobs %s --help", path, c.Args().First(), path)
		}
		_ = cli.ShowSubcommandHelp(c)
		return usagef("%s needs a command; see jobs %s --help", path, path)
	}
}

// helpCommand is `jobs help COMMAND...`: the help of that command, as `jobs COMMAND...
// --help` prints it (urfave/cli's own help command exits 1 on an unknown command, and
// helps with one word only).
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Usage:     "show the help of a command (the same as jobs COMMAND --help)",
		ArgsUsage: "[COMMAND [SUBCOMMAND]]",
		Action: func(c *cli.Context) error {
			cmds := c.App.Commands
			for _, word := range c.Args().Slice() {
				cmd := findCommand(cmds, word)
				if cmd == nil {
					return usagef("help: no command %q; see jobs --help", strings.Join(c.Args().Slice(), " "))
				}
				cmds = cmd.Subcommands
			}
			if c.NArg() == 0 {
				return cli.ShowAppHelp(c)
			}
			return c.App.RunContext(c.Context, append(append([]string{"jobs"}, c.Args().Slice()...), "--help"))
		},
	}
}

// version is what jobs --version and jobs version print: the string workers and
// schedulers report in jobs workers, "unknown" for a binary without build information.
func version() string { return cmp.Or(proto.Version(), "unknown") }

func versionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version of jobs (the same as jobs --version)",
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("version takes no arguments, got %q", c.Args().First())
			}
			fmt.Fprintf(e.stdout, "jobs version %s\n", version())
			return nil
		},
	}
}

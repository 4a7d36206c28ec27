package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// hoistFlags moves a command's flags that follow its positional arguments in front of
// them: urfave/cli v2 stops parsing flags at the first argument, so without this
// `jobs ls default --state dead` would treat --state as an argument. Positional arguments
// are put after "--", so a payload such as "-1" stays an argument; a "--" typed by the
// user ends flag hoisting the same way. After the first argument only defined flags are
// hoisted. An unknown word there that looks like a flag (-x, --name) is refused rather
// than taken as an argument: `jobs enqueue rebuild --exclusiv` must not enqueue payload
// "--exclusiv". Such an argument is passed after "--"; numbers like -1 need no "--".
func hoistFlags(app *cli.App, args []string) ([]string, error) {
	if len(args) < 2 {
		return args, nil
	}
	out := []string{args[0]}
	i := skipFlags(app.Flags, args, 1, &out)
	cmds := app.Commands
	var cmd *cli.Command
	var path []string // the command's words, for messages: "cron add"
	for i < len(args) {
		next := findCommand(cmds, args[i])
		if next == nil {
			break
		}
		cmd = next
		path = append(path, next.Name)
		out = append(out, args[i])
		i = skipFlags(cmd.Flags, args, i+1, &out)
		cmds = cmd.Subcommands
	}
	if cmd == nil {
		return args, nil
	}
	var flags, positional []string
	help := false
	for i < len(args) {
		a := args[i]
		switch {
		case a == "--":
			positional = append(positional, args[i+1:]...)
			i = len(args)
		case isFlag(a) && !defined(cmd.Flags, a) && len(positional) > 0 && looksLikeFlag(a):
			return nil, usagef("%s: unknown flag %q; an argument that starts with '-' goes after \"--\", as in: jobs %s ARGS -- %s",
				strings.Join(path, " "), a, strings.Join(path, " "), a)
		case isFlag(a) && (defined(cmd.Flags, a) || !(len(positional) > 0)):
			flags = append(flags, a)
			help = help || isHelp(a)
			if takesValue(cmd.Flags, a) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			i++
		default:
			positional = append(positional, a)
			i++
		}
	}
	out = append(out, flags...)
	// With --help, urfave/cli reads the first argument as a help topic ("No help topic
	// for 'TYPE'"): the command's help is what was asked for, so drop the arguments.
	if len(positional) > 0 && !help {
		out = append(out, "--")
		out = append(out, positional...)
	}
	return out, nil
}

// looksLikeFlag reports whether a is shaped like a flag: one or two dashes, then a
// letter. Negative numbers ("-1", "-.5") and "-" (stdin) are not.
func looksLikeFlag(a string) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	return len(name) < len(a) && name != "" &&
		(name[0] >= 'a' && name[0] <= 'z' || name[0] >= 'A' && name[0] <= 'Z')
}

// skipFlags copies the flags (and their values) starting at args[i] to out and returns
// the index of the first token that is not one.
func skipFlags(defs []cli.Flag, args []string, i int, out *[]string) int {
	for i < len(args) && isFlag(args[i]) {
		*out = append(*out, args[i])
		if takesValue(defs, args[i]) && i+1 < len(args) {
			*out = append(*out, args[i+1])
			i++
		}
		i++
	}
	return i
}

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "-help" || a == "--h" }

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' && a != "--" }

// defined reports whether flag token a names one of defs (or help): a token like "-1"
// after the arguments is then an argument, not an unknown flag.
func defined(defs []cli.Flag, a string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	if name == "help" || name == "h" {
		return true
	}
	for _, f := range defs {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// takesValue reports whether flag token a ("--name" or "-n", without "=value") is defined
// in defs as a flag that takes a value. Unknown flags are left to the parser's error.
func takesValue(defs []cli.Flag, a string) bool {
	if strings.Contains(a, "=") {
		return false
	}
	name := strings.TrimLeft(a, "-")
	for _, f := range defs {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

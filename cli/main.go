package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/dmalab/dmalab/scenario"
)

// Exit statuses, the same for every subcommand.
const (
	exitOK       = 0 // success
	exitFindings = 1 // diagnostics, failed verification
	exitUsage    = 2 // bad usage, bad input, or a model that cannot run it
	exitInternal = 3 // a bug in dmalab: a panic
)

// command is one subcommand. run gets the arguments after the
// subcommand's name and returns the exit status.
type command struct {
	name    string
	summary string
	run     func(env *env, args []string) int
}

// env is what a subcommand may touch: its output streams (never os.Stdout
// directly, so tests can run commands in-process).
type env struct {
	stdout, stderr io.Writer
	// isTerminal reports whether stderr is a terminal (progress output).
	isTerminal bool
}

var commands = map[string]*command{}

// register adds a subcommand; each lives in its own file and registers
// itself from init.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("dmalab: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// Main runs the dmalab command line with args (the arguments after the
// program's name) on the process's standard output and error, and returns
// the exit status: 0 success, 1 findings, 2 bad usage or input.
func Main(args []string) int {
	e := &env{stdout: os.Stdout, stderr: os.Stderr, isTerminal: isTerminal(os.Stderr)}
	return dispatch(e, args)
}

// Run runs the command line with args, writing to stdout and stderr
// (never a terminal: no progress lines), and returns the exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	return dispatch(&env{stdout: stdout, stderr: stderr}, args)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// dispatch runs the subcommand named by args[0]; no subcommand runs the
// default scenario, as "dmalab run" does. A panic is a bug in dmalab, not
// in the input: it exits exitInternal, distinct from bad usage, with the
// value and the stack for a bug report.
func dispatch(e *env, args []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(e.stderr, "dmalab: internal error: %v\n\n"+
				"This is a bug in dmalab. Please report it at https://github.com/dmalab/dmalab/issues\n"+
				"with the command line and everything below.\n\n%s", r, debug.Stack())
			code = exitInternal
		}
	}()
	if len(args) == 0 {
		return commands["run"].run(e, nil)
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return c.run(e, []string{"--help"})
			}
		}
		usage(e.stdout)
		return exitOK
	case "--version", "-version":
		writeVersion(e.stdout)
		return exitOK
	}
	if strings.HasPrefix(name, "-") {
		// Flags without a subcommand belong to "run".
		return commands["run"].run(e, args)
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(e.stderr, "dmalab: unknown command %q\n\n", name)
		usage(e.stderr)
		return exitUsage
	}
	return c.run(e, args[1:])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "dmalab models, checks and measures data movement between CPUs, GPUs and I/O devices.")
	fmt.Fprintln(w, "\nUsage:\n  dmalab <command> [arguments]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nWith no command, dmalab runs the default scenario (dmalab run).")
	fmt.Fprintln(w, "Run \"dmalab <command> --help\" for a command's flags.")
	fmt.Fprintln(w, "Exit status: 0 success, 1 findings, 2 bad usage or input, 3 internal error.")
}

// newFlags returns a flag set for a subcommand whose --help prints
// synopsis, description and the flags to e.stdout.
func newFlags(e *env, name, synopsis, description string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: dmalab %s\n\n%s\n", synopsis, strings.TrimSpace(description))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nFlags:")
			printFlags(w, fs)
		}
	}
	return fs
}

// printFlags writes a flag set's flags as GNU tools and the README write
// them, "--json", rather than the flag package's "-json" (both are
// accepted), and each default once: flag.PrintDefaults appends
// "(default ...)" even where the help already says what the default is.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name
		}
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintf(w, "%s\n      %s", line, strings.ReplaceAll(help, "\n", "\n      "))
		if !isZeroDefault(f) && !strings.Contains(help, "default") {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// isZeroDefault says whether a flag's default is its type's zero value,
// which help leaves unsaid.
func isZeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "[]", "0s":
		return true
	}
	return false
}

// parseArgs parses flags that may come before, between or after the
// positional arguments ("dmalab run transfers --json" and "dmalab run
// --json transfers" mean the same). It returns the positionals, or the
// exit status to return at once: exitOK after --help, exitUsage after a
// bad flag (the flag package has already said why).
func parseArgs(e *env, fs *flag.FlagSet, args []string) (pos []string, exit int, stop bool) {
	// Help goes to stdout, once; the flag package would print it to its
	// error output before returning ErrHelp.
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return nil, exitOK, true
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(e.stdout)
				fs.Usage()
				return nil, exitOK, true
			}
			return nil, exitUsage, true
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, 0, false
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), 0, false
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// splitHelp removes -h, -help and --help from args (up to "--") and
// reports whether there was one, so that a command can parse the rest
// and check its arguments before printing help: "dmalab run nosuch
// --help" is an unknown scenario, not a request for help.
func splitHelp(args []string) (rest []string, help bool) {
	for i, a := range args {
		if a == "--" {
			return append(rest, args[i:]...), help
		}
		if a == "-h" || a == "-help" || a == "--help" {
			help = true
			continue
		}
		rest = append(rest, a)
	}
	return rest, help
}

// scenarioError reports an error of a scenario run and returns
// exitUsage: bad input (scenario.ErrUsage) with the command's name,
// anything else (a model that stalled, a size the memory cannot hold, a
// device the platform lacks) with the scenario's. Neither is a finding:
// findings are what a run reports, never why it could not run.
func scenarioError(e *env, cmd, name string, err error) int {
	if errors.Is(err, scenario.ErrUsage) {
		return usageError(e, cmd, "%s", scenario.UsageMessage(err))
	}
	fmt.Fprintf(e.stderr, "dmalab %s %s: %v\n", cmd, name, err)
	return exitUsage
}

// usageError reports bad usage or bad input on stderr and returns exitUsage.
func usageError(e *env, cmd string, format string, a ...any) int {
	fmt.Fprintf(e.stderr, "dmalab %s: %s\n", cmd, fmt.Sprintf(format, a...))
	return exitUsage
}

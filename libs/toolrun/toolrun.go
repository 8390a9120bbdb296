// Package toolrun is the harness shared by every tool's main: it runs a
// urfave/cli App so that the library never exits the process or dumps help
// on an error, turns errors and panics into one line on stderr prefixed
// with the tool name, and maps them to the exit status of the pipeline
// contract (0 success, 1 failure, 2 usage error). It also adds the global
// logging flags and builds the trace logger from them, and makes a stop
// signal remove the run's unfinished outputs (signals.go).
//
// A tool's main is
//
//	func main() { os.Exit(run(os.Args, os.Stdout, os.Stderr)) }
//	func run(args []string, stdout, stderr io.Writer) int {
//		return toolrun.Main(newApp(stdout), args, stdout, stderr)
//	}
package toolrun

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"ipu.local/libs/trace"
)

// Version is the toolchain version, recorded in packages as compiler=.
const Version = "0.1.0"

// Names of the global flags added by Main.
const (
	LogFormatFlag = "log-format"
	VerboseFlag   = "verbose"
)

// urfave/cli's version flag claims -v, which the tools use for --verbose;
// the version stays reachable as --version.
func init() {
	cli.VersionFlag = &cli.BoolFlag{
		Name:               "version",
		Usage:              "print the version",
		DisableDefaultText: true,
	}
}

// UsageError is a command-line mistake (bad flag, missing argument): Main
// reports it with a pointer to --help and exits with status 2.
type UsageError struct {
	Err error
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a *UsageError with a formatted message; %w wraps.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// Main runs app with args (args[0] is the program name) and returns the
// process exit status. It takes app over: it sets Writer, ErrWriter,
// ExitErrHandler and OnUsageError, adds --log-format and -v/--verbose, and
// defaults Name to the base name of args[0] and Version to Version.
//
// Flags may follow positional arguments (tool IN -o OUT) in an app without
// subcommands: Main moves them ahead, since urfave/cli stops parsing flags
// at the first argument.
//
// Output urfave/cli writes before any action starts (help, version) is held
// back and dropped if the run fails, so that a usage error is one line.
func Main(app *cli.App, args []string, stdout, stderr io.Writer) (status int) {
	if app.Name == "" && len(args) > 0 {
		app.Name = filepath.Base(args[0])
	}
	if app.Name == "" {
		app.Name = "tool"
	}
	name := app.Name
	if app.Version == "" {
		app.Version = Version
	}
	out := &heldWriter{w: stdout}
	app.Writer = out
	app.ErrWriter = stderr
	app.ExitErrHandler = func(*cli.Context, error) {}
	addGlobalFlags(app)
	run := &runState{}
	app.OnUsageError = usageError
	app.Before = run.mark(app.Before)
	app.Action = run.wrap(out, app.Action)
	prepareCommands(run, out, app.Commands)
	if len(app.Commands) == 0 {
		// A tool without subcommands has no use for "TOOL help": --help is
		// the way, and the help text stays free of a COMMANDS section.
		app.HideHelpCommand = true
		if !app.SkipFlagParsing && len(args) > 1 {
			args = append([]string{args[0]}, flagsFirst(args[1:], app.Flags)...)
		}
	}

	defer stopOnSignal(name, stderr)()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "%s: internal error: %s\n", name, oneLine(fmt.Sprint(r)))
			if os.Getenv("IPU_DEBUG") == "1" {
				stderr.Write(debug.Stack())
			}
			status = 1
		}
	}()

	if v := os.Getenv("IPU_HUGEPAGES"); v != "" && v != "0" && v != "1" {
		fmt.Fprintf(stderr, "%s: IPU_HUGEPAGES %q: want 0 (off) or 1 (on, the default)\n", name, v)
		return 1
	}
	startHugeHeap(inputHeap(app, args))
	tuneGC(app)
	if path := os.Getenv("IPU_CPUPROFILE"); path != "" {
		stop, err := startProfile(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: IPU_CPUPROFILE: %s\n", name, oneLine(err.Error()))
			return 1
		}
		defer stop()
	}
	if path := os.Getenv("IPU_MEMPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: IPU_MEMPROFILE: %s\n", name, oneLine(err.Error()))
			return 1
		}
		runtime.MemProfileRate = 4096
		defer func() {
			if err := writeHeapProfile(f); err != nil {
				os.Remove(path) // no half-written profile
				fmt.Fprintf(stderr, "%s: IPU_MEMPROFILE: %s\n", name, oneLine(err.Error()))
				status = 1
			}
		}()
	}
	err := app.Run(args)
	if err == nil {
		if err := out.release(); err != nil {
			fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(err.Error()))
			return 1
		}
		return 0
	}
	return report(stderr, name, err, run.started)
}

// startProfile writes a CPU profile of the run to path (IPU_CPUPROFILE,
// a developer's aid: go tool pprof bin/TOOL path).
func startProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeHeapProfile writes the run's allocation profile to f and closes
// it (IPU_MEMPROFILE, a developer's aid: go tool pprof
// -sample_index=alloc_space bin/TOOL FILE).
func writeHeapProfile(f *os.File) error {
	err := pprof.Lookup("allocs").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// report prints err as one line and returns the exit status for it.
func report(stderr io.Writer, name string, err error, started bool) int {
	var usage *UsageError
	if errors.As(err, &usage) || !started {
		// Before any action or Before hook ran, the error is urfave/cli's
		// complaint about the command line (for example a missing required
		// flag), worded with a capital letter.
		msg := oneLine(err.Error())
		if !started {
			msg = lowerFirst(msg)
		}
		fmt.Fprintf(stderr, "%s: %s (run %s --help)\n", name, msg, name)
		return 2
	}
	status := 1
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		status = coder.ExitCode() // cli.Exit("", 1): a failure already reported
	}
	if msg := oneLine(err.Error()); msg != "" {
		fmt.Fprintf(stderr, "%s: %s\n", name, msg)
	}
	return status
}

// Logger returns the trace logger on the app's error writer with the
// format and level chosen by the global flags.
func Logger(c *cli.Context) *slog.Logger {
	opts := trace.Options{Format: c.String(LogFormatFlag)}
	if c.Bool(VerboseFlag) {
		opts.Level = slog.LevelDebug
	}
	var w io.Writer = os.Stderr
	if c.App != nil && c.App.ErrWriter != nil {
		w = c.App.ErrWriter
	}
	return trace.New(w, opts)
}

func addGlobalFlags(app *cli.App) {
	for _, f := range app.Flags {
		for _, n := range f.Names() {
			if n == LogFormatFlag || n == VerboseFlag {
				return // already added, by an earlier Main on this app
			}
		}
	}
	app.Flags = append(app.Flags,
		&cli.StringFlag{
			Name:  LogFormatFlag,
			Usage: "log format on stderr: text or json",
			Value: trace.FormatText,
			Action: func(_ *cli.Context, v string) error {
				if !trace.CheckFormat(v) {
					return Usagef("--%s %q: want text or json", LogFormatFlag, v)
				}
				return nil
			},
		},
		&cli.BoolFlag{
			Name:    VerboseFlag,
			Aliases: []string{"v"},
			Usage:   "log debug events too",
		},
	)
}

// usageError marks urfave/cli's flag parsing errors as usage errors.
func usageError(_ *cli.Context, err error, _ bool) error {
	return &UsageError{Err: err}
}

// runState records whether the run got past command-line parsing.
type runState struct {
	started bool
}

func (s *runState) mark(before cli.BeforeFunc) cli.BeforeFunc {
	if before == nil {
		return nil
	}
	return func(c *cli.Context) error {
		s.started = true
		return before(c)
	}
}

func (s *runState) wrap(out *heldWriter, action cli.ActionFunc) cli.ActionFunc {
	if action == nil {
		return nil // urfave/cli shows help: held output, released on success
	}
	return func(c *cli.Context) error {
		s.started = true
		if err := out.release(); err != nil {
			return err
		}
		return action(c)
	}
}

func prepareCommands(s *runState, out *heldWriter, cmds []*cli.Command) {
	for _, cmd := range cmds {
		if cmd.OnUsageError == nil {
			cmd.OnUsageError = usageError
		}
		cmd.Before = s.mark(cmd.Before)
		cmd.Action = s.wrap(out, cmd.Action)
		prepareCommands(s, out, cmd.Subcommands)
	}
}

// heldWriter buffers what is written until release, then passes writes
// through.
type heldWriter struct {
	w        io.Writer
	buf      []byte
	released bool
}

func (h *heldWriter) Write(p []byte) (int, error) {
	if h.released {
		return h.w.Write(p)
	}
	h.buf = append(h.buf, p...)
	return len(p), nil
}

func (h *heldWriter) release() error {
	if h.released {
		return nil
	}
	h.released = true
	if len(h.buf) == 0 {
		return nil
	}
	_, err := h.w.Write(h.buf)
	h.buf = nil
	return err
}

// flagsFirst moves flags (with their values) ahead of positional
// arguments, keeping the order within each; everything after "--" stays
// positional.
func flagsFirst(args []string, flags []cli.Flag) []string {
	takesValue := map[string]bool{}
	for _, f := range flags {
		v, ok := f.(interface{ TakesValue() bool })
		for _, n := range f.Names() {
			takesValue[n] = ok && v.TakesValue()
		}
	}
	var opts, pos []string
	help := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(append(append(opts, "--"), pos...), args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		opts = append(opts, a)
		n := strings.TrimLeft(a, "-")
		if strings.Contains(n, "=") || !takesValue[n] {
			if n == "help" || n == "h" {
				help = true
			}
			continue
		}
		if i+1 == len(args) {
			return opts // the value is missing: let the parser say so
		}
		i++
		opts = append(opts, args[i])
	}
	if len(pos) == 0 || help {
		// Positionals after --help would be read as a help topic.
		return opts
	}
	// A "--" keeps a positional such as "-" or one that follows a
	// value-taking flag's value from being read as a flag.
	return append(append(opts, "--"), pos...)
}

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return strings.Join(fields, "; ")
}

func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError || !unicode.IsUpper(r) {
		return s
	}
	// Leave acronyms ("IPU ...") alone.
	if r2, _ := utf8.DecodeRuneInString(s[n:]); unicode.IsUpper(r2) {
		return s
	}
	return string(unicode.ToLower(r)) + s[n:]
}

// Package cli holds what the example programs share: the main function's exit codes
// (an error is printed once, by [Main]; SIGINT and SIGTERM end run's ctx), the flag
// set ([NewFlagSet]: -h says what the program does) and the one table of flag
// meanings ([Meaning], [Usage]: a flag name means the same in every program), the
// checks of flag values ([AtLeast], [URL], [CheckTopK] against the teacher server),
// the loading of -tasks ([TaskFlags]: task text and tests, SWE-bench, SWE-smith and
// Harbor sources told apart by their columns, [SplitTasks]; $HF_TOKEN through
// [HFToken]), the sandbox choice ([Sandbox]; [ImageSandbox] for repository tasks),
// and the progress bar ([Progress], drawn only where it cannot share a line with the
// program's output: [ProgressWriter]).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// Main runs run with a context that ends on SIGINT or SIGTERM, the command-line
// arguments and os.Stdout, and exits with [ExitCode] of its error, printing the error
// (prefixed with name) to stderr unless it is -h's.
func Main(name string, run func(ctx context.Context, args []string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	}
	os.Exit(ExitCode(err))
}

// ExitCode is the exit status for run's error: 0 for nil and for -h (flag.ErrHelp),
// 2 for a bad flag ([FlagError], or the flag package's own parse errors) and for a
// host the program cannot run on ([ErrSetup]), 1 otherwise.
func ExitCode(err error) int {
	var fe *FlagError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &fe), errors.Is(err, errParse), errors.Is(err, ErrSetup):
		return 2
	default:
		return 1
	}
}

// ErrSetup is wrapped by run's error when the program cannot do its work on this
// host as it is set up (no sandbox for the tasks' code, for example): it stops
// before producing any result, and says why.
var ErrSetup = errors.New("host setup")

// errParse marks the flag package's parse errors ("invalid value … for flag -x").
var errParse = errors.New("bad flag")

// Parse parses args with fs, which must use flag.ContinueOnError. Its error wraps
// flag.ErrHelp for -h and -help, after the usage was printed to fs's output; the flag
// package's own errors name the flag ("invalid value "x" for flag -groups") and have
// exit code 2. They are returned, not printed: [Main] prints an error once.
func Parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard) // the flag package would print a parse error, and the usage, itself
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	default:
		return fmt.Errorf("%w: %w (-h lists the flags)", errParse, err)
	}
}

// FlagError is a flag value the program cannot use; its message names the flag.
type FlagError struct {
	Flag   string // without the dash
	Value  any    // the value given
	Reason string // what the value must be ("at least 1")
}

// Error implements error.
func (e *FlagError) Error() string {
	return fmt.Sprintf("-%s %v: must be %s", e.Flag, e.Value, e.Reason)
}

// Logger is the programs' logger: log/slog records on w, as text, or as JSON lines
// with asJSON (their -log-json flag), at info level and above.
func Logger(w io.Writer, asJSON bool) *slog.Logger {
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// Locked returns a writer that passes each Write to w under a lock, for a program
// whose logger and own lines share stdout: a test's buffer then sees whole writes.
func Locked(w io.Writer) io.Writer { return &lockedWriter{w: w} }

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// AtLeast returns a [*FlagError] for flag name when v < lo, and nil otherwise.
func AtLeast(name string, v, lo int) error {
	if v < lo {
		return &FlagError{Flag: name, Value: v, Reason: fmt.Sprintf("at least %d", lo)}
	}
	return nil
}

// Python and BwrapPath are the interpreter and the bubblewrap binary [Sandbox] looks
// for (the sandbox package's defaults); tests point them at missing files.
var (
	Python    = bwrap.DefaultPython    // the Python interpreter inside the sandbox
	BwrapPath = bwrap.DefaultBwrapPath // the bubblewrap binary
)

// sudo is the prefix of an install command: none for root.
func sudo() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return "sudo "
}

// Install is the command that installs Debian packages on this machine.
func Install(pkgs string) string {
	return sudo() + "apt-get install -y --no-install-recommends " + pkgs
}

// Sandbox returns the sandbox factory of a program, after checking for python3 (it
// stops at once without it, with the install command).
//
// When only the simulator's scripted commands will run (scriptedOnly), a host
// without a working bubblewrap gets an unconfined factory instead, and w gets two
// lines that say so and give the install command. Model-written code never runs
// unconfined: with scriptedOnly false the probe's error is returned.
func Sandbox(ctx context.Context, scriptedOnly bool, w io.Writer) (*bwrap.Factory, error) {
	return SandboxLogged(ctx, scriptedOnly, w, nil)
}

// SandboxLogged is [Sandbox] with log as the sandbox's Logger: its probe, its
// enforcement (a warning when limits hold per process only) and its kills are logged.
func SandboxLogged(ctx context.Context, scriptedOnly bool, w io.Writer, log *slog.Logger) (*bwrap.Factory, error) {
	if _, err := os.Stat(Python); err != nil {
		return nil, fmt.Errorf("python3 not found (%s): the tasks' tests run with it; install it: %s", Python, Install("python3"))
	}
	f, err := bwrap.New(ctx, bwrap.Config{BwrapPath: BwrapPath, Python: Python, Logger: log})
	switch {
	case err == nil:
		return f, nil
	case !scriptedOnly:
		return nil, fmt.Errorf("the model's own code runs only in the bubblewrap sandbox: %w", err)
	case !errors.Is(err, bwrap.ErrBwrapNotFound) && !errors.Is(err, bwrap.ErrNamespacesDenied):
		return nil, err
	}
	why := "bubblewrap (bwrap) not found"
	if errors.Is(err, bwrap.ErrNamespacesDenied) {
		why = "bubblewrap cannot create namespaces here"
	}
	fmt.Fprintf(w, "UNCONFINED: %s, so the simulator's scripted commands run without a sandbox.\n", why)
	fmt.Fprintf(w, "  Model-written code (-vllm-url) needs it: %s\n", Install("bubblewrap"))
	return bwrap.New(ctx, bwrap.Config{Unconfined: true, Python: Python, Logger: log})
}

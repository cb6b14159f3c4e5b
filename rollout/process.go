package rollout

import (
	"context"
	"io"
)

// Starter is implemented by a [Sandbox] that can start a command and exchange data with
// it while it runs. It is optional: [Sandbox] does not require it, and code that needs it
// (the verifier of package reward, which talks to the solution process over a pipe)
// checks for it with a type assertion and returns an error that names it when it is
// missing. A wrapper around a Sandbox must forward Start to keep it.
//
// Implementations must be safe for concurrent use.
type Starter interface {
	// Start starts cmd and returns at once. cmd.Stdin must be nil: the command's
	// standard input is [Process.Stdin]. The command gets the same limits as one
	// given to Run: its Timeout (0 means the sandbox's default), the sandbox's output
	// caps (the streamed standard output counts towards the hard cap), and the
	// kill of everything it started when it ends, when ctx ends, when
	// [Process.Kill] is called or when the sandbox is closed. The error is for a
	// command that could not be started; a command that fails later is reported by
	// [Process.Wait].
	Start(ctx context.Context, cmd Command) (Process, error)
}

// Process is a command started by [Starter.Start]. The caller must call Wait exactly
// once; Kill may be called at any time, from any goroutine, any number of times.
type Process interface {
	// Stdin is the command's standard input. Closing it sends end of file.
	Stdin() io.WriteCloser
	// Stdout is the command's standard output as it is written. It ends (io.EOF)
	// when the command and every process holding it have exited. A command blocks
	// when it writes faster than Stdout is read, until its timeout.
	Stdout() io.Reader
	// Kill ends the command and everything it started. It does not wait.
	Kill()
	// Wait waits for the command and everything it started to end, closes Stdin and
	// Stdout (read Stdout to its end first), and reports what the command did as Run
	// would, with an empty Stdout (it was streamed). A command killed by Kill has the
	// exit code of SIGKILL (137) and no error.
	Wait() (CommandResult, error)
}

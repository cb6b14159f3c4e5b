package rollout

import (
	"context"
	"io/fs"
	"time"
)

// Sandbox is one confined workspace in which an agent's commands run and its files live.
// One rollout owns one Sandbox and closes it when done.
//
// Paths given to ReadFile and WriteFile are relative to the workspace root; a path that
// leaves the workspace (through "..", an absolute path or a symlink) is refused.
// Implementations must be safe for concurrent use.
type Sandbox interface {
	// Run runs a command inside the sandbox. A command that runs and fails (non-zero
	// exit, timeout, killed) is reported in the result, not as an error; the error is
	// for failures of the sandbox itself (could not start, ctx ended).
	Run(ctx context.Context, cmd Command) (CommandResult, error)
	// ReadFile reads a workspace file.
	ReadFile(name string) ([]byte, error)
	// WriteFile writes a workspace file, creating parent directories.
	WriteFile(name string, data []byte) error
	// FS is a read-only view of the workspace, for listing and searching.
	FS() fs.FS
	// Close kills anything still running and removes the workspace. It is idempotent.
	Close() error
}

// SandboxFactory makes one Sandbox per rollout. Implementations must be safe for
// concurrent use.
type SandboxFactory interface {
	// NewSandbox makes a fresh sandbox; the caller closes it.
	NewSandbox(ctx context.Context) (Sandbox, error)
}

// SandboxFactoryFunc adapts a function to a SandboxFactory.
type SandboxFactoryFunc func(ctx context.Context) (Sandbox, error)

// NewSandbox calls f(ctx).
func (f SandboxFactoryFunc) NewSandbox(ctx context.Context) (Sandbox, error) { return f(ctx) }

// Command is a command to run in a sandbox.
type Command struct {
	// Shell is run by /bin/sh -c when Argv is empty.
	Shell string
	// Argv, when set, is executed directly.
	Argv []string
	// Dir is the working directory relative to the workspace root ("" = the root).
	Dir string
	// Timeout bounds the command's wall time; 0 means the sandbox's default.
	Timeout time.Duration
	// Stdin is the command's standard input (none when nil).
	Stdin []byte
}

// CommandResult is what a command did.
type CommandResult struct {
	// ExitCode is the command's exit status; 124 on timeout as with coreutils timeout,
	// 128+signal when killed by a signal.
	ExitCode int
	Stdout   []byte // standard output, cut at the per-stream cap
	Stderr   []byte // standard error, cut at the per-stream cap
	// TimedOut reports that the timeout fired and the process group was killed.
	TimedOut bool
	// OutputTruncated reports that Stdout or Stderr was cut at the per-stream cap.
	OutputTruncated bool
	// OutputKilled reports that the command was killed for writing past the hard cap.
	OutputKilled bool
	// Unconfined reports that the command ran without isolation (an explicit opt-in).
	Unconfined bool
	// Duration is the command's wall time as the sandbox measured it.
	Duration time.Duration
}

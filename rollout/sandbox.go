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

// SandboxSpec says what sandbox a task needs. The zero value is the sandbox
// [SandboxFactory.NewSandbox] makes: the factory's own root and an empty workspace.
type SandboxSpec struct {
	// Image is an image reference ("registry/repo:tag", "registry/repo@sha256:…", or
	// whatever the factory's image source reads); "" means the factory's own root.
	Image string
	// WorkDir is the absolute directory inside the image that becomes the sandbox's
	// workspace: a writable copy-on-write view of the image's directory there (created
	// empty when the image has none). The file tools' paths are relative to it and
	// commands start in it. "" means the image's WorkingDir, then "/workspace".
	WorkDir string
	// Network, when true, lets the sandbox's commands reach the network; otherwise
	// they have only a loopback interface of their own.
	Network bool
}

// SpecFactory is a SandboxFactory that can make a sandbox for a spec: an image's root
// file system with its working directory as the workspace. A factory that cannot
// honour a spec (an image without an image source, an image it cannot get, a network
// it cannot give) returns an error and no sandbox; it never makes a sandbox that
// ignores part of the spec. Implementations must be safe for concurrent use; the
// caller closes each sandbox. The bubblewrap implementation is
// [github.com/agentic-opd/agenticopd/rollout/bwrap.Factory]; a backend that runs
// the same images elsewhere (a Kubernetes pod per sandbox) implements the same
// interface.
type SpecFactory interface {
	SandboxFactory
	// NewSandboxFor makes a fresh sandbox for spec; the caller closes it.
	NewSandboxFor(ctx context.Context, spec SandboxSpec) (Sandbox, error)
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

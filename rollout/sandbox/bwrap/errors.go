package bwrap

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Construction errors wrap one of the first three inside a
// [*ProbeError]; reach them with errors.Is.
var (
	// ErrBwrapNotFound means the bubblewrap binary is missing.
	ErrBwrapNotFound = errors.New("sandbox: bubblewrap (bwrap) not found")
	// ErrNamespacesDenied means bubblewrap ran but the kernel (or a container's
	// seccomp profile, or an LSM policy) refused to create the namespaces.
	ErrNamespacesDenied = errors.New("sandbox: the kernel refused to create namespaces")
	// ErrProbeFailed means the construction probe failed for another reason, for
	// example an interpreter or base directory the sandbox uid cannot reach.
	ErrProbeFailed = errors.New("sandbox: probe failed")

	// ErrInvalidConfig wraps a [Config] a caller must fix.
	ErrInvalidConfig = errors.New("sandbox: invalid config")
	// ErrInvalidCommand wraps a [rollout.Command] that cannot be run (no command, a
	// working directory outside the workspace or missing).
	ErrInvalidCommand = errors.New("sandbox: invalid command")
	// ErrClosed is returned by a Sandbox after Close, and by a Run that Close
	// interrupted.
	ErrClosed = errors.New("sandbox: closed")
	// ErrNotRegular is returned by the file tools for a workspace entry that is not a
	// regular file (a FIFO, socket or device the agent planted).
	ErrNotRegular = errors.New("sandbox: not a regular file")
	// ErrHardLinked is returned by WriteFile for a workspace file that has other hard
	// links: the host-side write would reach them too.
	ErrHardLinked = errors.New("sandbox: file has other hard links")
	// ErrStart means bubblewrap could not set up the sandbox for a command (the
	// command itself never ran). The error carries bubblewrap's message.
	ErrStart = errors.New("sandbox: could not start the command")
)

// ProbeError is the error [New] returns when the construction probe fails. It wraps
// [ErrBwrapNotFound], [ErrNamespacesDenied] or [ErrProbeFailed].
type ProbeError struct {
	// Kind is one of the three sentinels above.
	Kind error
	// Command is the probe command line.
	Command []string
	// Stderr is what the probe wrote to stderr (bubblewrap's message), trimmed.
	Stderr string
	// ExitCode is the probe's exit status (-1 when it could not be started).
	ExitCode int
	// Err is the underlying error, if any.
	Err error
	// Advice says what to do about it.
	Advice string
}

// Error implements error.
func (e *ProbeError) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if e.Stderr != "" {
		fmt.Fprintf(&b, ": %s", e.Stderr)
	} else if e.ExitCode > 0 {
		fmt.Fprintf(&b, ": exit status %d", e.ExitCode)
	}
	if e.Advice != "" {
		b.WriteString("; ")
		b.WriteString(e.Advice)
	}
	return b.String()
}

// Unwrap returns the sentinel and the underlying error.
func (e *ProbeError) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

func configError(msg string) error { return fmt.Errorf("%w: %s", ErrInvalidConfig, msg) }

func commandError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidCommand, fmt.Sprintf(format, args...))
}

const unconfinedAdvice = "or set Config.Unconfined to run commands without isolation (not a security boundary)"

// classifyProbe turns a failed probe into a ProbeError.
func classifyProbe(cmdline []string, stderr string, exit int, err error, uid int) *ProbeError {
	pe := &ProbeError{Command: cmdline, Stderr: strings.TrimSpace(stderr), ExitCode: exit, Err: err, Kind: ErrProbeFailed}
	low := strings.ToLower(pe.Stderr)
	switch {
	case strings.Contains(low, "namespace") || strings.Contains(low, "uid map") ||
		strings.Contains(low, "setting up uid") || strings.Contains(low, "unshare"):
		pe.Kind = ErrNamespacesDenied
		pe.Advice = "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 where it exists, " +
			"user.max_user_namespaces > 0, no seccomp or AppArmor rule denying them) " + unconfinedAdvice
	case strings.Contains(low, "can't find source path") || strings.Contains(low, "permission denied"):
		pe.Advice = fmt.Sprintf("the base directory and the interpreter must be reachable by host uid %d "+
			"(not under a 0700 home directory)", uid)
	default:
		pe.Advice = "check the interpreter path and the base directory"
	}
	return pe
}

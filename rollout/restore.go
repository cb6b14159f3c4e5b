package rollout

import (
	"context"
	"errors"
)

// Restorer is implemented by a [Sandbox] that can give its workspace back to a state
// a verifier can use after the agent is done with it: what the agent's code took
// away from the workspace's owner (the permissions of chmod 000 /workspace, of its
// files and directories) is given back. It is optional; the verifier of package
// reward calls it, when a sandbox has it, before it runs anything there. Restore
// must not be called while a command of the sandbox runs. A wrapper around a
// Sandbox should forward Restore.
type Restorer interface {
	// Restore restores the workspace. Its error is for the sandbox itself (the host
	// could not change the workspace), never for what the workspace holds, with
	// one exception: an error wrapping [ErrRestoreBudget] says that what the
	// workspace holds made the restore take longer than its implementation allows.
	// When ctx ends first, the error is ctx's.
	Restore(ctx context.Context) error
}

// ErrRestoreBudget is wrapped by the error of a [Restorer] whose walk of the
// workspace did not end within its own time bound: the workspace holds more than
// can be restored in that time. Only the agent's actions put it there, so the
// verifier of package reward scores a rollout whose Restore fails with it as the
// solution's fault (its sandbox broken by the agent), never as an error that fails
// the group. Reach it with errors.Is.
var ErrRestoreBudget = errors.New("rollout: restoring the workspace took longer than its time bound")

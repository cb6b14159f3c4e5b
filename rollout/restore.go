package rollout

import "context"

// Restorer is implemented by a [Sandbox] that can give its workspace back to a state
// a verifier can use after the agent is done with it: what the agent's code took
// away from the workspace's owner (the permissions of chmod 000 /workspace, of its
// files and directories) is given back. It is optional; the verifier of package
// reward calls it, when a sandbox has it, before it runs anything there. Restore
// must not be called while a command of the sandbox runs. A wrapper around a
// Sandbox should forward Restore.
type Restorer interface {
	// Restore restores the workspace. Its error is for the sandbox itself (the host
	// could not change the workspace), never for what the workspace holds.
	Restore(ctx context.Context) error
}

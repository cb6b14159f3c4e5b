package rollout

import "context"

// Prestarter is implemented by a [SpecFactory] whose sandboxes take long to start
// (a Kubernetes pod: scheduling, an image pull, a container start), so that a caller
// who knows what it will ask for next can have them started ahead. It is optional,
// found by a type assertion like [Starter]: the env calls it when it draws its next
// task, for the group's rollouts and their grading sandboxes (2×G), while the
// current group still runs. A wrapper around a SpecFactory should forward it.
//
// Prestart is a hint. It returns at once (what it starts, it starts in the
// background, owned by the factory), it never fails (a sandbox that cannot be
// started is dropped, and the NewSandboxFor that would have taken it makes its own
// and reports the error), and NewSandboxFor works the same without it. The
// factory may start fewer than n (it caps what it keeps idle) and ends what is
// still unused when it is closed or after its own idle time. ctx carries values
// only; the background work is bounded by the factory's life, not by ctx.
//
// Implementations must be safe for concurrent use.
type Prestarter interface {
	// Prestart starts up to n sandboxes for spec, for NewSandboxFor(ctx, spec) to
	// take; NewSandbox takes those of the zero spec.
	Prestart(ctx context.Context, spec SandboxSpec, n int)
}

package reward

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Patches [VerifyPatch] can be asked to grade, besides a diff of the caller's.
const (
	// PatchGold stands for the task's gold patch ([tasks.Repo.GoldPatch], reversed
	// when GoldReversed is set).
	PatchGold = "\x00gold"
	// PatchEmpty stands for no change at all.
	PatchEmpty = ""
)

// VerifyPatch grades patch as if an agent had made that change: a fresh sandbox of
// fresh is prepared ([PrepareRepo]), the patch applied there with git apply, and the
// sandbox graded by [VerifyRepo] like a rollout's. patch is a unified diff against the
// task's start state, [PatchGold] or [PatchEmpty]. It is how a task is validated
// (the gold patch must resolve it, the empty patch must not) and how the grading
// rules are tested with changes an agent might make. A patch that does not apply in
// the first sandbox is an error: unlike an agent's change, it comes from the caller.
func VerifyPatch(ctx context.Context, fresh rollout.SandboxFactory, t tasks.Task, patch string, opts RepoOptions) (Verification, error) {
	if t.Repo == nil {
		return Verification{Rule: RuleNoTests}, fmt.Errorf("%w (task %q is not a repository task)", ErrNoTests, t.ID)
	}
	reverse := false
	if patch == PatchGold {
		patch, reverse = t.Repo.GoldPatch, t.Repo.GoldReversed
		if patch == "" {
			return Verification{}, fmt.Errorf("reward: task %q has no gold patch", t.ID)
		}
	}
	sb, err := fresh.NewSandbox(ctx)
	if err != nil {
		return Verification{Rule: RuleSandboxError}, fmt.Errorf("reward: the sandbox to apply the patch in: %w", err)
	}
	defer sb.Close()
	if err := PrepareRepo(ctx, sb, t.Repo); err != nil {
		return Verification{Rule: RuleSandboxError}, err
	}
	if patch != "" {
		cmd := git + "apply --whitespace=nowarn"
		if reverse {
			cmd += " --reverse"
		}
		res, err := sb.Run(ctx, rollout.Command{Shell: cmd + " -", Stdin: []byte(patch), Timeout: gitTimeout})
		if err != nil {
			return Verification{Rule: RuleSandboxError}, fmt.Errorf("reward: apply the patch: %w", err)
		}
		if res.ExitCode != 0 {
			return Verification{Rule: RuleSandboxError}, fmt.Errorf("reward: task %q: the patch does not apply: %s", t.ID, tail(res.Stderr))
		}
	}
	return VerifyRepo(ctx, sb, fresh, t, opts)
}

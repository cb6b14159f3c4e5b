package reward_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

// noRestore hides the sandbox's Restore (and keeps its Start), as a sandbox
// implementation without one would be.
type noRestore struct {
	rollout.Sandbox
	rollout.Starter
}

func (s noRestore) Run(ctx context.Context, c rollout.Command) (rollout.CommandResult, error) {
	return s.Sandbox.Run(ctx, c)
}

// failAfter is a factory whose sandboxes fail after the first n were made.
type failAfter struct {
	f rollout.SandboxFactory
	n int64
	k atomic.Int64
}

func (f *failAfter) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	if f.k.Add(1) > f.n {
		return nil, errors.New("the host cannot make sandboxes")
	}
	return f.f.NewSandbox(ctx)
}

// hostile runs the agent's last command in the rollout's sandbox, as a policy would
// through the terminal tool, and requires that the sandbox itself did not fail.
func hostile(t *testing.T, sb rollout.Sandbox, shell string) {
	t.Helper()
	_, err := sb.Run(t.Context(), rollout.Command{Shell: shell, Timeout: 20 * time.Second})
	require.NoError(t, err, "%s", shell)
}

// fillMemory grows a workspace file (a tmpfs workspace is memory) until three
// commands in a row meet the sandbox's memory limit.
func fillMemory(t *testing.T, sb rollout.Sandbox) {
	t.Helper()
	hits := 0
	for i := 0; i < 80 && hits < 3; i++ {
		res, err := sb.(*bwrap.Sandbox).RunDetailed(t.Context(), rollout.Command{Shell: "head -c 1000000 /dev/zero >> fill", Timeout: 20 * time.Second})
		require.NoError(t, err)
		if res.MemoryLimitHit {
			hits++
		} else {
			hits = 0
		}
	}
	require.Equal(t, 3, hits, "the workspace fills the sandbox's memory")
}

// TestVerifySolutionBreaksItsSandbox: a correct solution whose agent then breaks its
// own sandbox (fills its memory so that the OOM killer takes bubblewrap, fills its
// workspace past the quota, takes the workspace's permissions away) cannot turn its
// verification into an infrastructure error, which would drop its whole group: it
// scores as the solution's fault (C = 0.1), or, where Restore repairs the damage, as
// usual. Failures no agent can cause (the tests' sandbox, a factory that can no
// longer make sandboxes, shown by the control run) stay errors.
func TestVerifySolutionBreaksItsSandbox(t *testing.T) {
	task := tasks.Builtin()[0]
	small, err := bwrap.New(t.Context(), bwrap.Config{Limits: bwrap.Limits{Memory: 32 << 20}, DiskQuota: 64 << 20})
	require.NoError(t, err)
	walked, err := bwrap.New(t.Context(), bwrap.Config{DisableWorkspaceMount: true, DiskQuota: 8 << 20})
	require.NoError(t, err)
	full, err := bwrap.New(t.Context(), bwrap.Config{DiskQuota: 8 << 20})
	require.NoError(t, err)
	std := bwrapSandboxes(t)
	fault := func(v reward.Verification) reward.Verification {
		return reward.Verification{Correctness: 0.1, Rule: reward.RuleSolutionFault, SandboxFault: v.SandboxFault}
	}
	cases := []struct {
		name    string
		factory rollout.SandboxFactory
		tests   func(rollout.SandboxFactory) rollout.SandboxFactory // nil: the same factory
		break_  func(t *testing.T, sb rollout.Sandbox) rollout.Sandbox
		want    func(v reward.Verification) reward.Verification // nil: an error
		sbFault bool
		slow    bool // the solution takes a second to import
	}{
		{
			name: "memory full, the OOM killer takes bubblewrap", factory: small,
			break_:  func(t *testing.T, sb rollout.Sandbox) rollout.Sandbox { fillMemory(t, sb); return sb },
			want:    fault,
			sbFault: true,
		},
		{
			// The quota's check comes every DiskCheckInterval (200 ms); a solution
			// slower to import than that is killed while the tests wait for it.
			name: "workspace over its quota (walked)", factory: walked, slow: true,
			break_: func(t *testing.T, sb rollout.Sandbox) rollout.Sandbox {
				hostile(t, sb, "head -c 6000000 /dev/zero > a; head -c 6000000 /dev/zero > b")
				return sb
			},
			want: fault,
		},
		{
			name: "tmpfs workspace full", factory: full, slow: true,
			break_: func(t *testing.T, sb rollout.Sandbox) rollout.Sandbox {
				hostile(t, sb, "head -c 10000000 /dev/zero > a")
				return sb
			},
			want: fault,
		},
		{
			name: "chmod 000 /workspace, restored", factory: std,
			break_: func(t *testing.T, sb rollout.Sandbox) rollout.Sandbox {
				hostile(t, sb, "chmod 000 solution.py /workspace")
				return sb
			},
			want: func(reward.Verification) reward.Verification {
				return reward.Verification{Correctness: 1, Rule: reward.RulePassed}
			},
		},
		{
			name: "chmod 000 /workspace, a sandbox without Restore", factory: std,
			break_: func(t *testing.T, sb rollout.Sandbox) rollout.Sandbox {
				hostile(t, sb, "chmod 000 solution.py /workspace")
				return noRestore{sb, sb.(rollout.Starter)}
			},
			want:    fault,
			sbFault: true,
		},
		{
			name: "the tests' sandbox cannot be made", factory: std,
			tests: func(f rollout.SandboxFactory) rollout.SandboxFactory { return &failAfter{f: f} },
			break_: func(t *testing.T, sb rollout.Sandbox) rollout.Sandbox {
				hostile(t, sb, "chmod 000 solution.py /workspace")
				return noRestore{sb, sb.(rollout.Starter)}
			},
		},
		{
			name: "the control run shows the host broken", factory: std,
			tests: func(f rollout.SandboxFactory) rollout.SandboxFactory { return &failAfter{f: f, n: 1} },
			break_: func(t *testing.T, sb rollout.Sandbox) rollout.Sandbox {
				hostile(t, sb, "chmod 000 solution.py /workspace")
				return noRestore{sb, sb.(rollout.Starter)}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := tc.factory.NewSandbox(t.Context())
			require.NoError(t, err)
			t.Cleanup(func() { _ = sb.Close() })
			sol := task.ReferenceSolution
			if tc.slow {
				sol = "import time\ntime.sleep(1)\n" + sol
			}
			require.NoError(t, sb.WriteFile("solution.py", []byte(sol)))
			sb = tc.break_(t, sb)
			tests := tc.factory
			if tc.tests != nil {
				tests = tc.tests(tests)
			}
			v, err := reward.Verify(t.Context(), sb, tests, task, reward.VerifyOptions{})
			if tc.want == nil {
				require.Error(t, err, "rule %s (%s)", v.Rule, v.Reason)
				require.Equal(t, reward.RuleSandboxError, v.Rule)
				require.False(t, v.SandboxFault)
				return
			}
			require.NoError(t, err)
			t.Logf("%s: %s", v.Rule, v.Reason)
			got := reward.Verification{Correctness: v.Correctness, Rule: v.Rule, SandboxFault: v.SandboxFault}
			require.Empty(t, cmp.Diff(tc.want(v), got), "(-want +got), reason %s", v.Reason)
			if tc.sbFault {
				require.True(t, v.SandboxFault, "reason %s", v.Reason)
			}
		})
	}
}

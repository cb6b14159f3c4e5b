package agenticopd_test

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// saboteur is a scripted student whose rollouts each follow one plan of a list, in
// the order they start: write the task's reference solution (turn 1), run one shell
// command (turn 2), stop (turn 3). The plan is written into the first turn so later
// turns read it back. Every rollout uses the same turns and tools, so the reward
// differs only by correctness.
type saboteur struct {
	task  tasks.Task
	mu    sync.Mutex
	plans []string
}

// sabotage is each plan's command and whether its solution takes a second to import.
var sabotage = map[string]struct {
	shell string
	slow  bool
}{
	"honest": {shell: "python3 -c 'import solution'"},
	// Fills the sandbox's memory with a workspace file (a tmpfs workspace is memory
	// charged to the sandbox, and it stays), so that the OOM killer takes the next
	// command's bubblewrap or interpreter: the verifier's solution process.
	"memory": {shell: "for i in $(seq 80); do head -c 1000000 /dev/zero >> fill || break; done"},
	// Fills the workspace to its quota: the quota's check (every 200 ms) kills the
	// solution process, which takes a second to import, while the tests wait for it.
	"quota": {shell: "head -c 60000000 /dev/zero > fill", slow: true},
	// Fills /tmp and /dev/shm: both are private to the command and end with it.
	"tmp": {shell: "head -c 20000000 /dev/zero > /tmp/fill; head -c 20000000 /dev/zero > /dev/shm/fill; sleep 60 &"},
	// Takes the workspace away from its own owner: Verify restores it.
	"chmod": {shell: "chmod 000 solution.py && chmod 000 /workspace"},
}

var sabotagePlanRE = regexp.MustCompile(`Plan: (\w+)\.`)

func (s *saboteur) turn(in vllmtest.ScriptInput) (string, bool) {
	plan := ""
	for _, m := range in.Messages {
		if sm := sabotagePlanRE.FindStringSubmatch(m.Content); m.Role == chat.RoleAssistant && sm != nil {
			plan = sm[1]
			break
		}
	}
	switch in.Turn {
	case 1:
		s.mu.Lock()
		plan, s.plans = s.plans[0], s.plans[1:]
		s.mu.Unlock()
		sol := s.task.ReferenceSolution
		if sabotage[plan].slow {
			sol = "import time\ntime.sleep(1)\n" + sol
		}
		return "Plan: " + plan + ". Writing the solution.\n" +
			toolCall("write_file", map[string]any{"path": "solution.py", "content": sol}), true
	case 2:
		return toolCall("terminal", map[string]any{"command": sabotage[plan].shell}), true
	default:
		return "Done.", true
	}
}

// TestCollectGroupRolloutCannotVetoItsGroup: in a group on a real bubblewrap sandbox,
// rollouts that write a correct solution and then break their own sandbox (fill its
// memory so the OOM killer takes the verifier's bubblewrap, fill the workspace to its
// quota, fill /tmp and /dev/shm, chmod 000 the workspace) cannot make the group fail:
// it is returned, each saboteur is scored as the solution's fault (C = 0.1) or, where
// nothing it did outlives its command or Restore repairs it, as usual, and the honest
// rollouts as usual. The faults are counted.
func TestCollectGroupRolloutCannotVetoItsGroup(t *testing.T) {
	task := tasks.Builtin()[0]
	type verdict struct {
		Rule        reward.Rule
		Correctness float64
	}
	passed := verdict{reward.RulePassed, 1}
	fault := verdict{reward.RuleSolutionFault, 0.1}
	cases := []struct {
		name   string
		limits bwrap.Config
		plans  []string
		want   []verdict
		faults float64 // env/solution_sandbox_faults: the rollout's sandbox could not run the solution
	}{
		{
			// The workspace can hold more than the sandbox's memory.
			name:   "memory, tmp, chmod",
			limits: bwrap.Config{Limits: bwrap.Limits{Memory: 32 << 20}, DiskQuota: 64 << 20},
			plans:  []string{"honest", "memory", "tmp", "chmod"},
			want:   []verdict{passed, fault, passed, passed},
			faults: 1,
		},
		{
			// The memory can hold the full workspace and an interpreter.
			name:   "quota",
			limits: bwrap.Config{Limits: bwrap.Limits{Memory: 96 << 20}, DiskQuota: 48 << 20},
			plans:  []string{"honest", "quota"},
			want:   []verdict{passed, fault},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sab := &saboteur{task: task, plans: tc.plans}
			sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(sab.turn))
			sb, err := bwrap.New(t.Context(), tc.limits)
			require.NoError(t, err)
			env, err := agenticopd.NewEnv(agenticopd.Config{
				Policy: sim.Client(), GroupSize: len(tc.plans), MaxRollouts: len(tc.plans),
				DisableOPD: true, SandboxFactory: sb,
			})
			require.NoError(t, err)

			g, err := env.CollectGroup(context.Background(), task)
			require.NoError(t, err, "a rollout failed its group")
			byPlan := map[string]verdict{}
			for _, r := range g.Rollouts {
				plan := sabotagePlanRE.FindStringSubmatch(r.Trajectory.Messages[2].Content)[1]
				v := r.Verification
				t.Logf("%s: %s %.1f: %s", plan, v.Rule, v.Correctness, v.Reason)
				byPlan[plan] = verdict{v.Rule, v.Correctness}
				require.InDelta(t, 0.7*v.Correctness+0.3, r.Reward.Reward, 1e-9, "the same turns and tools for all")
			}
			want := map[string]verdict{}
			for i, p := range tc.plans {
				want[p] = tc.want[i]
			}
			require.Empty(t, cmp.Diff(want, byPlan), "(-want +got)")
			m := env.Metrics()
			require.Equal(t, tc.faults, m["env/solution_sandbox_faults"])
			require.Zero(t, m["env/failed_groups"])
			require.Zero(t, m["env/sandbox_failures"])
		})
	}
}

// failingAfter is a sandbox factory that makes its first n sandboxes and then fails,
// as a host that can no longer make sandboxes (its disk, bubblewrap gone) does.
type failingAfter struct {
	rollout.SandboxFactory
	n atomic.Int64
}

func (f *failingAfter) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	if f.n.Add(-1) < 0 {
		return nil, errors.New("the host cannot make sandboxes")
	}
	return f.SandboxFactory.NewSandbox(ctx)
}

// TestCollectGroupInfrastructureFailureFailsTheGroup: the other side of the split.
// When the verifier's own fresh sandbox cannot be made, no agent action caused it:
// the group fails with ErrRolloutFailed instead of training on a made-up score.
func TestCollectGroupInfrastructureFailureFailsTheGroup(t *testing.T) {
	task := tasks.Builtin()[0]
	sab := &saboteur{task: task, plans: []string{"honest"}}
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(sab.turn))
	sb, err := bwrap.New(t.Context(), bwrap.Config{})
	require.NoError(t, err)
	f := &failingAfter{SandboxFactory: sb}
	f.n.Store(1) // the rollout's sandbox, not the tests'
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy: sim.Client(), GroupSize: 1, MaxRollouts: 1, DisableOPD: true, SandboxFactory: f,
	})
	require.NoError(t, err)
	_, err = env.CollectGroup(context.Background(), task)
	require.ErrorIs(t, err, agenticopd.ErrRolloutFailed)
	require.ErrorContains(t, err, "the host cannot make sandboxes")
	m := env.Metrics()
	require.Equal(t, 1.0, m["env/failed_groups"])
	require.Zero(t, m["env/solution_sandbox_faults"])
}

package benchfixture_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/internal/benchfixture"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/sandboxtest"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestGenPyMatchesOutput runs gen.py with the host's python3 and compares its output
// with the Go version the test sandbox answers with.
func TestGenPyMatchesOutput(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed; gen.py cannot be compared with Output")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gen.py"), []byte(benchfixture.GenPy), 0o644))
	for _, tc := range []struct{ seed, n int }{{1, 0}, {1, 1}, {1302, 485}, {7, 25}} {
		out, err := exec.Command(py, filepath.Join(dir, "gen.py"), strconv.Itoa(tc.seed), strconv.Itoa(tc.n)).Output()
		require.NoError(t, err)
		assert.Equal(t, string(out), benchfixture.Output(tc.seed, tc.n), "seed %d n %d", tc.seed, tc.n)
	}
}

// TestShape runs the fixture's rollout and checks the shape the benchmarks rely on.
func TestShape(t *testing.T) {
	sim := vllmtest.NewServer(t, benchfixture.ServerOptions(1)...)
	agent, err := rollout.NewAgent(sim.Client(), benchfixture.AgentConfig())
	require.NoError(t, err)
	sb, err := sandboxtest.New(sandboxtest.Config{Exec: benchfixture.Exec}).NewSandbox(t.Context())
	require.NoError(t, err)
	defer sb.Close()
	traj, err := agent.Run(t.Context(), benchfixture.Messages(), sb)
	require.NoError(t, err)

	require.Equal(t, rollout.StopNoToolCalls, traj.Stop, traj.Err)
	require.Len(t, traj.Turns, benchfixture.Turns)
	require.Len(t, opd.TrajectoryPairs(traj, 0), benchfixture.Pairs)
	generated, deltas, prompt := 0, 0, 0
	for _, s := range traj.Segments {
		switch s.Kind {
		case rollout.SegSampled:
			generated += s.End - s.Start
		case rollout.SegDelta:
			deltas += s.End - s.Start
		case rollout.SegPrompt:
			prompt += s.End - s.Start
		}
	}
	t.Logf("prompt %d tokens, tool results and other deltas %d", prompt, deltas)
	L := len(traj.Tokens)
	t.Logf("%d tokens, %d generated (%.1f%%)", L, generated, 100*float64(generated)/float64(L))
	assert.InDelta(t, 16000, L, 1600, "about 16k tokens")
	assert.InDelta(t, 0.25, float64(generated)/float64(L), 0.03, "about a quarter generated")
	for turn := 2; turn < benchfixture.Turns; turn++ {
		assert.Contains(t, traj.Messages[2*turn+2].Content, benchfixture.Output(benchfixture.Seed*100+turn, 485)[:40])
	}
	hint := sim.Tokenize(benchfixture.Hint(7))
	t.Logf("hint: %d tokens", len(hint))
	assert.InDelta(t, 40, len(hint), 8, "hints of about 40 tokens")
}

// TestRealSandboxSameTrajectory runs the rollout in the bubblewrap sandbox too: gen.py
// really runs, and the trajectory is the same token for token.
func TestRealSandboxSameTrajectory(t *testing.T) {
	sim := vllmtest.NewServer(t, benchfixture.ServerOptions(1)...)
	agent, err := rollout.NewAgent(sim.Client(), benchfixture.AgentConfig())
	require.NoError(t, err)
	run := func(f rollout.SandboxFactory) *rollout.Trajectory {
		sb, err := f.NewSandbox(t.Context())
		require.NoError(t, err)
		defer sb.Close()
		traj, err := agent.Run(t.Context(), benchfixture.Messages(), sb)
		require.NoError(t, err)
		return traj
	}
	real, err := bwrap.New(t.Context(), bwrap.Config{})
	if err != nil {
		t.Skipf("the bubblewrap sandbox is not available here: %v", err)
	}
	want := run(sandboxtest.New(sandboxtest.Config{Exec: benchfixture.Exec}))
	got := run(real)
	require.Equal(t, want.Tokens, got.Tokens)
}

// TestUnverifiedTaskSamePrompt checks that the task without tests, which the test
// sandbox needs, gives the same first messages as the task with them.
func TestUnverifiedTaskSamePrompt(t *testing.T) {
	require.False(t, benchfixture.UnverifiedTask().HasTests())
	want := tasks.Prompt{}.Messages(benchfixture.Task())
	assert.Equal(t, want, benchfixture.Prompt.Messages(benchfixture.UnverifiedTask()))
	assert.Equal(t, want, benchfixture.Messages())
}

package agenticopd_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// toyCache is the image cache of the whole test process, so that the toy image is
// unpacked once; TestMain removes it.
var toyCache struct {
	once  sync.Once
	dir   string
	cache *images.Cache
	err   error
}

// toyImage sets cfg up for the toy repository's image: the default sandbox factory
// with the process's image cache over imagestest's registry, served over loopback. It
// returns the image reference the toy tasks must name.
var toyImage = func(t *testing.T, cfg *agenticopd.Config) string {
	t.Helper()
	ref := imagestest.SWERef(t)
	toyCache.once.Do(func() {
		if toyCache.dir, toyCache.err = os.MkdirTemp("", "agenticopd-test-images-"); toyCache.err == nil {
			toyCache.cache, toyCache.err = images.NewCache(images.CacheConfig{Dir: toyCache.dir})
		}
	})
	require.NoError(t, toyCache.err)
	cfg.Images = toyCache.cache
	return ref
}

func removeToyCache() {
	if toyCache.dir != "" {
		_ = os.RemoveAll(toyCache.dir)
	}
}

// TestCollectGroupRepositoryTask runs the toy task "add" end to end through
// CollectGroup: the agents work in sandboxes of the toy image (pulled over loopback
// from the in-process registry, unpacked by images.Cache), with the terminal and
// file tools; grading applies each agent's diff and the hidden tests in a fresh
// sandbox of the image. The fixing rollout is resolved, the wrong fix is not, and the
// group carries teacher rows.
func TestCollectGroupRepositoryTask(t *testing.T) {
	t.Parallel() // long: it overlaps the other long tests
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript((&imagestest.ToyStudent{}).Turn), vllmtest.WithChatScript(judgeScript))
	cfg := agenticopd.Config{Policy: sim.Client(), GroupSize: 2, DistillTopK: topK, MaxRollouts: 2}
	ref := toyImage(t, &cfg)
	ts, err := tasks.LoadSWE(filepath.Join("testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)
	task := ts[0]
	task.Repo.Image = ref
	env, err := agenticopd.NewEnv(cfg)
	require.NoError(t, err)

	g, err := env.CollectGroup(context.Background(), task)
	require.NoError(t, err)
	require.Empty(t, g.Dropped)
	require.NoError(t, g.Data.Validate(atropos.ValidateOptions{}))
	rules := map[reward.Rule]int{}
	for _, r := range g.Rollouts {
		v := r.Verification
		require.NotNil(t, v.Repo, "rollout not graded as a repository task: %+v", v)
		rules[v.Rule]++
		switch v.Rule {
		case reward.RuleResolved:
			require.Equal(t, 1.0, v.Correctness)
			require.Contains(t, v.Repo.Diff, "+    return a + b")
		case reward.RuleUnresolved:
			require.Equal(t, 0.2, v.Correctness)
			require.Equal(t, []string{"tests/test_arith.py::test_add"}, v.Repo.F2PFailing, v.Output)
		}
		require.Equal(t, "git apply", v.Repo.Applied)
		require.NotContains(t, r.Trajectory.Messages[1].Content, "test_add")
	}
	require.Equal(t, map[reward.Rule]int{reward.RuleResolved: 1, reward.RuleUnresolved: 1}, rules)

	rows := 0
	for s := range g.Rollouts {
		for p := range g.Data.Tokens[s] {
			if ids, _ := g.Data.DistillRow(s, p); len(ids) > 0 {
				rows++
			}
		}
	}
	require.Positive(t, rows, "the group carries no teacher rows")
	m := env.Metrics()
	require.Equal(t, 0.5, m["swe/resolved_rate"])
	require.Equal(t, 0.5, m["swe/f2p_rate"])
	require.Equal(t, 1.0, m["swe/p2p_rate"])
	require.Equal(t, 0.0, m["swe/test_file_edits"])
}

// TestRepositoryRolloutCannotVetoItsGroup: an agent that destroys its repository
// (rm -rf .git, so no change can be taken) is scored as the solution's fault; the
// group is returned.
func TestRepositoryRolloutCannotVetoItsGroup(t *testing.T) {
	t.Parallel() // long: it overlaps the other long tests
	var n atomic.Int64
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		if in.Turn > 1 {
			return "Done.", true
		}
		if n.Add(1)%2 == 1 {
			return toolCall("terminal", map[string]any{"command": "rm -rf .git && echo gone"}), true
		}
		return toolCall("patch", map[string]any{"path": "toycalc/arith.py",
			"old_string": "\"\"\"Return the sum of a and b.\"\"\"\n    return a - b", "new_string": "\"\"\"Return the sum of a and b.\"\"\"\n    return a + b"}), true
	}), vllmtest.WithChatScript(judgeScript))
	cfg := agenticopd.Config{Policy: sim.Client(), GroupSize: 2, DistillTopK: topK, MaxRollouts: 2, DisableOPD: true}
	ref := toyImage(t, &cfg)
	ts, err := tasks.LoadSWE(filepath.Join("testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)
	task := ts[0]
	task.Repo.Image = ref
	env, err := agenticopd.NewEnv(cfg)
	require.NoError(t, err)

	g, err := env.CollectGroup(context.Background(), task)
	require.NoError(t, err)
	rules := map[reward.Rule]int{}
	for _, r := range g.Rollouts {
		rules[r.Verification.Rule]++
		if r.Verification.Rule == reward.RulePatchFailed {
			require.True(t, r.Verification.SandboxFault, r.Verification.Reason)
			require.Equal(t, 0.1, r.Verification.Correctness)
		}
	}
	require.Equal(t, map[reward.Rule]int{reward.RuleResolved: 1, reward.RulePatchFailed: 1}, rules)
	require.Equal(t, 1.0, env.Metrics()["env/solution_sandbox_faults"])
}

func TestNewEnvRefusesImagesBesideAFactory(t *testing.T) {
	sim := vllmtest.NewServer(t)
	f := rollout.SandboxFactoryFunc(func(context.Context) (rollout.Sandbox, error) { return nil, nil })
	_, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), SandboxFactory: f, Images: &images.Cache{}})
	require.ErrorIs(t, err, agenticopd.ErrInvalidConfig)
	require.ErrorContains(t, err, "give the image source to your factory")
}

func TestRepositoryTaskNeedsASpecFactory(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript((&imagestest.ToyStudent{}).Turn))
	plain := rollout.SandboxFactoryFunc(func(context.Context) (rollout.Sandbox, error) {
		t.Error("a repository task's rollout asked a plain factory for a sandbox")
		return nil, context.Canceled
	})
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), GroupSize: 2, SandboxFactory: plain, DisableOPD: true})
	require.NoError(t, err)
	ts, err := tasks.LoadSWE(filepath.Join("testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)
	_, err = env.CollectGroup(context.Background(), ts[0])
	require.ErrorIs(t, err, agenticopd.ErrNoSpecFactory)
	require.ErrorContains(t, err, "set Config.Images")
}

// specFactory is a plain factory that also makes sandboxes for images: NewEnv takes it
// for repository tasks.
type specFactory struct{ rollout.SandboxFactoryFunc }

func (specFactory) NewSandboxFor(context.Context, rollout.SandboxSpec) (rollout.Sandbox, error) {
	return nil, context.Canceled
}

func TestNewEnvRefusesAFactoryThatCannotServeRepositoryTasks(t *testing.T) {
	sim := vllmtest.NewServer(t)
	ts, err := tasks.LoadSWE(filepath.Join("testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(t, err)
	plain := rollout.SandboxFactoryFunc(func(context.Context) (rollout.Sandbox, error) { return nil, context.Canceled })
	mixed := append(tasks.Builtin(), ts[0])

	for _, tc := range []struct {
		name string
		cfg  agenticopd.Config
		want string // "" when NewEnv takes it
	}{
		{"a wrapper that does not forward NewSandboxFor", agenticopd.Config{Dataset: mixed, SandboxFactory: plain},
			"SandboxFactory (rollout.SandboxFactoryFunc) does not implement rollout.SpecFactory: a wrapper must forward NewSandboxFor"},
		{"the same for eval tasks only", agenticopd.Config{EvalTasks: ts[:1], SandboxFactory: plain},
			"task agentic-opd__swe-toy-1 is a repository task"},
		{"the default factory without Images", agenticopd.Config{Dataset: mixed},
			"set Images (an images.Cache) for the default sandbox factory"},
		{"the default factory with Images", agenticopd.Config{Dataset: mixed, Images: &images.Cache{}}, ""},
		{"a factory for images", agenticopd.Config{Dataset: mixed, SandboxFactory: specFactory{plain}}, ""},
		{"a plain factory and no repository task", agenticopd.Config{Dataset: tasks.Builtin(), SandboxFactory: plain}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Policy, cfg.DisableOPD, cfg.EvalSize = sim.Client(), true, tasks.NoEval
			_, err := agenticopd.NewEnv(cfg)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, agenticopd.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

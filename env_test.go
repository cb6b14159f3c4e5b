package agenticopd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeToyCache()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

const topK = 8

// coder is a scripted student: even rollouts write a stub, see the tests fail and fix
// it; odd rollouts write the right solution at once. The plan is written into the
// first turn so later turns can read it back.
type coder struct{ n atomic.Int64 }

var planRE = regexp.MustCompile(`Plan: (\w+)\.`)

func toolCall(name string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"name": name, "arguments": args})
	return "<tool_call>\n" + string(b) + "\n</tool_call>"
}

func (c *coder) turn(in vllmtest.ScriptInput) (string, bool) {
	var task tasks.Task
	for _, t := range tasks.Builtin() {
		for _, m := range in.Messages {
			if m.Role == chat.RoleUser && strings.Contains(m.Content, t.Statement) {
				task = t
			}
		}
	}
	if task.ID == "" {
		return "", false
	}
	plan := ""
	for _, m := range in.Messages {
		if sm := planRE.FindStringSubmatch(m.Content); m.Role == chat.RoleAssistant && sm != nil {
			plan = sm[1]
			break
		}
	}
	if plan == "" {
		plan = map[bool]string{true: "fix", false: "direct"}[c.n.Add(1)%2 == 1]
	}
	run := toolCall("terminal", map[string]any{"command": "python test_solution.py"})
	switch {
	case in.Turn == 1:
		sol := task.ReferenceSolution
		if plan == "fix" {
			sol = stub(task.ReferenceSolution)
		}
		return "Plan: " + plan + ". Writing files.\n" +
			toolCall("write_file", map[string]any{"path": "solution.py", "content": sol}) + "\n" +
			toolCall("write_file", map[string]any{"path": "test_solution.py", "content": task.TestCode}), true
	case in.Turn == 2:
		return run, true
	case plan == "fix" && in.Turn == 3:
		return "Fixing.\n" + toolCall("write_file", map[string]any{"path": "solution.py", "content": task.ReferenceSolution}), true
	case plan == "fix" && in.Turn == 4:
		return run, true
	default:
		return "Done: all tests passed.", true
	}
}

func stub(ref string) string {
	var b strings.Builder
	for _, m := range regexp.MustCompile(`(?m)^def (\w+)\(`).FindAllStringSubmatch(ref, -1) {
		fmt.Fprintf(&b, "def %s(*a, **k):\n    return None\n", m[1])
	}
	return b.String()
}

const hintText = "Write the real implementation before running the tests; the stub returns None."

// judgeScript gives a hint (two votes of three) when the next state shows failing tests.
func judgeScript(in vllmtest.ChatScriptInput) []string {
	last := in.Messages[len(in.Messages)-1].Content
	failed := strings.Contains(last, "AssertionError")
	out := make([]string, in.N)
	for i := range out {
		out[i] = `\boxed{-1}`
		if failed && i != 1 {
			out[i] = `\boxed{1} [HINT_START]` + hintText + `[HINT_END]`
		}
	}
	return out
}

type fixture struct {
	sim    *vllmtest.Server
	client *vllm.Client
	env    *agenticopd.Env
	task   tasks.Task
}

func newFixture(t *testing.T, mod func(*agenticopd.Config)) *fixture {
	t.Helper()
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript((&coder{}).turn), vllmtest.WithChatScript(judgeScript))
	client := sim.Client()
	cfg := agenticopd.Config{Policy: client, GroupSize: 2, DistillTopK: topK, MaxRollouts: 2}
	if mod != nil {
		mod(&cfg)
	}
	env, err := agenticopd.NewEnv(cfg)
	require.NoError(t, err)
	return &fixture{sim: sim, client: client, env: env, task: tasks.Builtin()[0]}
}

// hintTokens is the template's rendering of a hint message, computed from the
// simulator's tokenizer directly.
func (f *fixture) hintTokens(hint string) []int32 {
	return f.sim.Tokenize("<|im_start|>user\n" + opd.HintMessage(hint).Content + "<|im_end|>\n")
}

// teacherTopK asks the simulator for the ranked top-K at every position of seq.
func (f *fixture) teacherTopK(t *testing.T, seq []int32) *vllm.PromptLogprobs {
	t.Helper()
	k, one := topK, 1
	resp, err := f.client.Completions(context.Background(), vllm.CompletionRequest{
		Prompts: [][]int32{seq}, MaxTokens: one, PromptLogprobs: &k,
	})
	require.NoError(t, err)
	require.NotNil(t, resp.Choices[0].PromptLogprobs)
	return resp.Choices[0].PromptLogprobs
}

func TestCollectGroupInline(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	g, err := f.env.CollectGroup(ctx, f.task)
	require.NoError(t, err)
	require.Empty(t, g.Dropped)
	require.NoError(t, g.Data.Validate(atropos.ValidateOptions{}))
	require.Len(t, g.Rollouts, 2)

	hinted := 0
	for s, r := range g.Rollouts {
		traj := r.Trajectory
		seq := g.OPD.Sequences[s]
		// The teacher sequence: the student's ids with each hint inserted before its turn.
		var teacher []int32
		shift := map[int]int{} // turn index -> teacher offset
		prev, off := 0, 0
		scoredTurns := map[int]bool{}
		for _, tr := range seq.Turns {
			if tr.Status != opd.StatusScored {
				continue
			}
			turn := traj.Turns[tr.Turn]
			h := f.hintTokens(tr.Hint.Text)
			teacher = append(teacher, traj.Tokens[prev:turn.GenPromptStart]...)
			teacher = append(teacher, h...)
			off += len(h)
			prev = turn.GenPromptStart
			shift[tr.Turn] = off
			scoredTurns[tr.Turn] = true
			assert.Equal(t, hintText, tr.Hint.Text)
		}
		teacher = append(teacher, traj.Tokens[prev:]...)
		var ref *vllm.PromptLogprobs
		if len(scoredTurns) > 0 {
			hinted++
			ref = f.teacherTopK(t, teacher)
		}
		masks := g.Data.Masks[s]
		rows := 0
		for p := range traj.Tokens {
			ids, lps := g.Data.DistillRow(s, p)
			inScored := -1
			for ti, turn := range traj.Turns {
				if scoredTurns[ti] && p >= turn.Start && p < turn.End {
					inScored = ti
				}
			}
			if inScored < 0 {
				assert.Empty(t, ids, "sequence %d position %d: row outside a hinted turn", s, p)
				continue
			}
			rows++
			require.NotEqual(t, rollout.MaskIgnore, masks[p], "row on a token that is not generated")
			wantIDs, wantLps, err := ref.AppendTopK(p+shift[inScored], topK, nil, nil)
			require.NoError(t, err)
			if diff := cmp.Diff(wantIDs, ids); diff != "" {
				t.Fatalf("sequence %d position %d ids (-want +got):\n%s", s, p, diff)
			}
			assert.Equal(t, wantLps, lps)
		}
		if len(scoredTurns) > 0 {
			assert.Positive(t, rows)
		}
	}
	require.Equal(t, 1, hinted, "the fixing rollout, and only it, gets a hint")

	// One judge request per turn pair, one teacher request for the group.
	pairs := g.OPD.Metrics.Pairs
	assert.Equal(t, pairs, f.sim.RequestCount("/v1/chat/completions"))
	teacherRequests := 0
	for _, r := range f.sim.Requests() {
		if r.Path == "/v1/completions" && r.JSON["prompt_logprobs"] != nil {
			teacherRequests++
		}
	}
	assert.Equal(t, 2, teacherRequests, "one from the group, one from this test's reference")
	assert.Equal(t, 1, g.OPD.Metrics.TeacherRequests)
	assert.Equal(t, 0, g.OPD.Metrics.AlignmentMismatches)
}

func TestCollectGroupTaskPromptMatchesHandComputation(t *testing.T) {
	f := newFixture(t, func(c *agenticopd.Config) { c.Placement = opd.TaskPrompt })
	ctx := context.Background()
	g, err := f.env.CollectGroup(ctx, f.task)
	require.NoError(t, err)
	require.NoError(t, g.Data.Validate(atropos.ValidateOptions{}))

	tools := make([]chat.Tool, 0)
	for _, tool := range rollout.DefaultTools() {
		tools = append(tools, tool.Definition())
	}
	checked := 0
	for s, r := range g.Rollouts {
		traj := r.Trajectory
		for _, tr := range g.OPD.Sequences[s].Turns {
			if tr.Status != opd.StatusScored {
				continue
			}
			turn := traj.Turns[tr.Turn]
			// The reference: hint appended to the last user message of the context,
			// rendered with the generation prompt, then the student's own ids.
			enhanced := opd.AppendHint(traj.Messages[:tr.Message], tr.Hint.Text)
			add := true
			rendered, err := f.client.Tokenize(ctx, vllm.TokenizeRequest{Messages: enhanced, Tools: tools, AddGenerationPrompt: &add})
			require.NoError(t, err)
			seq := append(append([]int32{}, rendered.Tokens...), traj.Tokens[turn.Start:turn.End]...)
			ref := f.teacherTopK(t, seq)
			for p := turn.Start; p < turn.End; p++ {
				want, _, err := ref.AppendTopK(len(rendered.Tokens)+p-turn.Start, topK, nil, nil)
				require.NoError(t, err)
				got, _ := g.Data.DistillRow(s, p)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("sequence %d position %d (-want +got):\n%s", s, p, diff)
				}
				checked++
			}
		}
	}
	require.Positive(t, checked)
}

func TestCollectGroupDropsEqualScoresBeforeOPD(t *testing.T) {
	// Every rollout solves the task at once: equal scores, so no judge and no teacher.
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		c := &coder{}
		c.n.Store(1) // always "direct"
		return c.turn(in)
	}), vllmtest.WithChatScript(judgeScript))
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), GroupSize: 2, DistillTopK: topK})
	require.NoError(t, err)
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[1])
	require.NoError(t, err)
	assert.Equal(t, agenticopd.DropScoresEqual, g.Dropped)
	assert.Nil(t, g.Data.Distill)
	assert.Zero(t, sim.RequestCount("/v1/chat/completions"))
	assert.Equal(t, float64(1), env.Metrics()["env/dropped_groups/scores_equal"])
	// The reference counts the rollouts of dropped groups in train/ (its buffers fill
	// before the filter); no OPD ran, so no opd/ means.
	assert.Equal(t, float64(2), env.Metrics()["train/total_rollouts"])
	assert.Equal(t, float64(2), g.Metrics["train/total_rollouts"])
	assert.NotContains(t, env.Metrics(), "opd/mean_hints_per_rollout")
}

func TestMetricsMeansOverTheReferenceDenominators(t *testing.T) {
	var groups []*agenticopd.Group
	f := newFixture(t, func(c *agenticopd.Config) {
		c.OnGroup = func(g *agenticopd.Group) { groups = append(groups, g) }
	})
	var out strings.Builder
	require.NoError(t, f.env.Process(context.Background(), 2, &out))
	require.Len(t, groups, 2)

	var n, passed, withPairs, withHint, hints, scored int
	var reward, correctness, efficiency, tools float64
	for _, g := range groups {
		for s, r := range g.Rollouts {
			n++
			reward += r.Reward.Reward
			correctness += r.Reward.Correctness
			efficiency += r.Reward.Efficiency
			tools += r.Reward.ToolUsage
			if r.Reward.Correctness >= 0.8 {
				passed++
			}
			seq := g.OPD.Sequences[s]
			if len(seq.Turns) > 0 {
				withPairs++
			}
			h, sc := 0, 0
			for _, tr := range seq.Turns {
				if tr.Hint.Text != "" {
					h++
				}
				if tr.Status == opd.StatusScored {
					sc++
				}
			}
			hints += h
			scored += sc
			if h > 0 {
				withHint++
			}
		}
	}
	require.Positive(t, withHint)
	want := map[string]float64{
		"train/total_rollouts":       float64(n),
		"train/mean_reward":          reward / float64(n),
		"train/mean_correctness":     correctness / float64(n),
		"train/mean_efficiency":      efficiency / float64(n),
		"train/mean_tool_usage":      tools / float64(n),
		"train/pass_rate":            float64(passed) / float64(n),
		"opd/total_hints":            float64(hints),
		"opd/total_scored_turns":     float64(scored),
		"opd/mean_hints_per_rollout": float64(hints) / float64(withPairs),
		"opd/mean_turns_scored":      float64(scored) / float64(withPairs),
		"opd/hint_rate":              float64(withHint) / float64(withPairs),
		"env/groups":                 2,
	}
	got := f.env.Metrics()
	for k, v := range want {
		assert.InDelta(t, v, got[k], 1e-12, k)
	}
}

func TestCollectGroupPolicyDownFailsGroup(t *testing.T) {
	f := newFixture(t, nil)
	f.sim.SetError("/v1/completions", 400, `{"error":{"message":"bad","type":"BadRequestError","code":400}}`)
	_, err := f.env.CollectGroup(context.Background(), f.task)
	require.ErrorIs(t, err, agenticopd.ErrRolloutFailed)
}

func TestProcessAndEvaluate(t *testing.T) {
	f := newFixture(t, nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "groups.jsonl")
	out, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.env.Process(context.Background(), 2, out))
	require.NoError(t, out.Close())

	in, err := os.Open(path)
	require.NoError(t, err)
	defer in.Close()
	n := 0
	require.NoError(t, atropos.ReadJSONL(in, func(g *atropos.ScoredDataGroup) error {
		n++
		require.Equal(t, 2, g.Len())
		return g.Validate(atropos.ValidateOptions{})
	}))
	assert.Equal(t, 2, n)

	m, err := f.env.Evaluate(context.Background(), dir)
	require.NoError(t, err)
	assert.Equal(t, float64(2), m["eval/n_items"])
	assert.Contains(t, m, "eval/mean_reward")
	for _, name := range []string{"metrics.json", "samples.jsonl"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.NotEmpty(t, b, name)
	}
	var doc struct {
		Config struct {
			ModelName string `json:"model_name"`
		} `json:"config_general"`
		Results map[string]map[string]float64 `json:"results"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, "metrics.json"))
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, m, doc.Results["all"])
	assert.Equal(t, m, doc.Results["atropos|agentic_opd|0"])
	assert.Equal(t, f.sim.Model(), doc.Config.ModelName)
}

func TestProcessGivesUpAfterRepeatedFailures(t *testing.T) {
	f := newFixture(t, nil)
	f.sim.SetError("/v1/completions", 400, `{"error":{"message":"bad","type":"BadRequestError","code":400}}`)
	var out strings.Builder
	err := f.env.Process(context.Background(), 1, &out)
	require.ErrorIs(t, err, agenticopd.ErrRolloutFailed)
	assert.Empty(t, out.String(), "nothing is written for failed groups")
	assert.Equal(t, float64(2), f.env.Metrics()["env/failed_groups"], "one failure more than the groups asked for")
}

func TestCollectGroupTeacherTooShortLeavesTurnsUnscored(t *testing.T) {
	f := newFixture(t, func(c *agenticopd.Config) { c.TeacherMaxLen = 100 })
	g, err := f.env.CollectGroup(context.Background(), f.task)
	require.NoError(t, err, "a teacher too short for a turn does not fail the group")
	require.NoError(t, g.Data.Validate(atropos.ValidateOptions{}))
	assert.Equal(t, 1, g.OPD.Metrics.TeacherTooLong, "the fixing rollout's hinted turn")
	assert.Zero(t, g.OPD.Metrics.ScoredTurns)
	for s := range g.Data.Tokens {
		for p := range g.Data.Tokens[s] {
			ids, _ := g.Data.DistillRow(s, p)
			require.Empty(t, ids)
		}
	}
	for _, r := range f.sim.Requests() {
		assert.False(t, r.Path == "/v1/completions" && r.JSON["prompt_logprobs"] != nil, "no teacher request")
	}
}

func TestEvaluateRunsTheFirstEvalSizeTasks(t *testing.T) {
	var eval []tasks.Task
	for i := range 12 {
		task := tasks.Builtin()[i%8]
		task.ID = fmt.Sprintf("%s-%d", task.ID, i)
		eval = append(eval, task)
	}
	f := newFixture(t, func(c *agenticopd.Config) { c.EvalTasks = eval })
	m, err := f.env.Evaluate(context.Background(), "")
	require.NoError(t, err)
	assert.Equal(t, float64(10), m["eval/n_items"], "eval_size 10 of 12")
	assert.Equal(t, 1.0, m["eval/pass_rate"], "the scripted coder fixes every task")

	// Greedy, and no OPD: no judge, no teacher.
	generations := 0
	for _, r := range f.sim.Requests() {
		if r.Path != "/v1/completions" {
			continue
		}
		generations++
		assert.Nil(t, r.JSON["prompt_logprobs"], "no teacher request")
		assert.Equal(t, 0.0, r.JSON["temperature"], "greedy")
	}
	assert.Positive(t, generations)
	assert.Zero(t, f.sim.RequestCount("/v1/chat/completions"), "no judge request")
	assert.NotContains(t, f.env.Metrics(), "train/total_rollouts", "eval rollouts are not training rollouts")
}

func TestCollectGroupTeacherLogprobsAsRef(t *testing.T) {
	off := newFixture(t, nil)
	g, err := off.env.CollectGroup(context.Background(), off.task)
	require.NoError(t, err)
	require.Empty(t, g.Dropped)
	assert.Nil(t, g.Data.RefLogprobs, "off by default")

	f := newFixture(t, func(c *agenticopd.Config) { c.TeacherLogprobsAsRef = true })
	g, err = f.env.CollectGroup(context.Background(), f.task)
	require.NoError(t, err)
	require.Empty(t, g.Dropped)
	require.NoError(t, g.Data.Validate(atropos.ValidateOptions{}))
	require.Len(t, g.Data.RefLogprobs, g.Data.Len())
	scored := 0
	for s, toks := range g.Data.Tokens {
		ref := g.Data.RefLogprobs[s]
		require.Len(t, ref, len(toks))
		for p, tok := range toks {
			ids, lps := g.Data.DistillRow(s, p)
			if len(ids) == 0 {
				require.Equal(t, atropos.MaskedLogprob, ref[p], "sequence %d position %d: no teacher row, the sentinel", s, p)
				continue
			}
			scored++
			// The teacher's logprob of the student's own token: its entry in the
			// ranked row when it is there, below the row's last entry otherwise.
			require.LessOrEqual(t, ref[p], 0.0)
			found := false
			for k, id := range ids {
				if int(id) == tok {
					assert.Equal(t, float64(lps[k]), ref[p], "sequence %d position %d", s, p)
					found = true
				}
			}
			if !found {
				assert.LessOrEqual(t, ref[p], float64(lps[len(lps)-1]), "sequence %d position %d", s, p)
			}
		}
	}
	require.Positive(t, scored)

	var b strings.Builder
	require.NoError(t, atropos.WriteJSONL(&b, g.Data))
	var line map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(b.String()), &line))
	var written [][]float64
	require.NoError(t, json.Unmarshal(line["ref_logprobs"], &written))
	if diff := cmp.Diff(g.Data.RefLogprobs, written); diff != "" {
		t.Fatalf("ref_logprobs on the wire (-want +got):\n%s", diff)
	}
}

func TestProcessRetriesAFailedGroupWithTheNextTask(t *testing.T) {
	mod := func(c *agenticopd.Config) { c.MaxGroups = 1 }
	// The same configuration gives the same task order.
	order := newFixture(t, mod).env
	var want []string
	for range 3 {
		task, err := order.NextTask(context.Background())
		require.NoError(t, err)
		want = append(want, task.ID)
	}

	var got []string
	f := newFixture(t, func(c *agenticopd.Config) {
		mod(c)
		c.OnGroup = func(g *agenticopd.Group) { got = append(got, g.Task.ID) }
	})
	// The first generation fails: the first group fails and is not written.
	f.sim.FailNext("/v1/completions", 1, 400, `{"error":{"message":"bad","type":"BadRequestError","code":400}}`)
	var out strings.Builder
	require.NoError(t, f.env.Process(context.Background(), 2, &out))
	if diff := cmp.Diff(want[1:], got); diff != "" {
		t.Fatalf("tasks written (-want +got):\n%s", diff)
	}
	n := 0
	require.NoError(t, atropos.ReadJSONL(strings.NewReader(out.String()), func(g *atropos.ScoredDataGroup) error {
		n++
		return g.Validate(atropos.ValidateOptions{})
	}))
	assert.Equal(t, 2, n, "exactly the groups asked for")
	assert.Equal(t, float64(1), f.env.Metrics()["env/failed_groups"])
	assert.Equal(t, float64(1), f.env.Metrics()["env/policy_failures"])
}

func TestProcessKeepsEqualScoreGroups(t *testing.T) {
	// Every rollout solves the task at once: CollectGroup would drop the group,
	// Process keeps it, as Atropos's process mode does, and runs OPD on it.
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		c := &coder{}
		c.n.Store(1) // always "direct"
		return c.turn(in)
	}), vllmtest.WithChatScript(judgeScript))
	var groups []*agenticopd.Group
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy: sim.Client(), GroupSize: 2, DistillTopK: topK,
		OnGroup: func(g *agenticopd.Group) { groups = append(groups, g) },
	})
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, env.Process(context.Background(), 1, &out))
	require.Len(t, groups, 1)
	assert.Empty(t, groups[0].Dropped)
	assert.True(t, groups[0].Data.ScoresEqual())
	assert.NotNil(t, groups[0].Data.Distill, "OPD ran")
	assert.Positive(t, sim.RequestCount("/v1/chat/completions"), "the judge was asked")
	n := 0
	require.NoError(t, atropos.ReadJSONL(strings.NewReader(out.String()), func(g *atropos.ScoredDataGroup) error {
		n++
		assert.True(t, g.ScoresEqual())
		return nil
	}))
	assert.Equal(t, 1, n)
}

func TestEvaluateFailedRolloutIsAnErrorSample(t *testing.T) {
	f := newFixture(t, nil)
	f.sim.SetError("/v1/completions", 400, `{"error":{"message":"bad","type":"BadRequestError","code":400}}`)
	dir := t.TempDir()
	m, err := f.env.Evaluate(context.Background(), dir)
	require.NoError(t, err, "a failed eval rollout is a sample, as in the reference")
	assert.Equal(t, map[string]float64{
		"eval/n_items": 2, "eval/mean_correctness": 0, "eval/mean_reward": 0, "eval/pass_rate": 0,
	}, m)
	b, err := os.ReadFile(filepath.Join(dir, "samples.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2)
	for i, line := range lines {
		var s agenticopd.EvalSample
		require.NoError(t, json.Unmarshal([]byte(line), &s))
		assert.Equal(t, f.env.EvalTasks()[i].ID, s.TaskID)
		assert.True(t, strings.HasPrefix(s.Response, "ERROR: "), s.Response)
		assert.Contains(t, s.Error, "rollout failed")
		assert.Zero(t, s.Correctness)
		assert.Zero(t, s.Turns)
	}
}

func TestCollectGroupDropsTooLongBeforeOPD(t *testing.T) {
	f := newFixture(t, func(c *agenticopd.Config) { c.MaxTokenLen = 100 })
	g, err := f.env.CollectGroup(context.Background(), f.task)
	require.NoError(t, err)
	require.False(t, g.Data.ScoresEqual(), "the fixture's group has different scores")
	assert.Equal(t, agenticopd.DropTooLong, g.Dropped)
	assert.Nil(t, g.Data.Distill)
	assert.Zero(t, f.sim.RequestCount("/v1/chat/completions"), "no judge request")
	for _, r := range f.sim.Requests() {
		assert.False(t, r.Path == "/v1/completions" && r.JSON["prompt_logprobs"] != nil, "no teacher request")
	}
	assert.Equal(t, float64(1), f.env.Metrics()["env/dropped_groups/too_long"])
}

// countingSandboxes counts the sandboxes open at once: one per rollout in flight, and
// one more for the tests while it is verified.
type countingSandboxes struct {
	inner         rollout.SandboxFactory
	mu            sync.Mutex
	open, maxOpen int
}

type countedSandbox struct {
	rollout.Sandbox
	f    *countingSandboxes
	once sync.Once
}

func (f *countingSandboxes) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	sb, err := f.inner.NewSandbox(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.open++
	f.maxOpen = max(f.maxOpen, f.open)
	f.mu.Unlock()
	return &countedSandbox{Sandbox: sb, f: f}, nil
}

// Start forwards to the wrapped sandbox, which the verifier needs.
func (s *countedSandbox) Start(ctx context.Context, c rollout.Command) (rollout.Process, error) {
	return s.Sandbox.(rollout.Starter).Start(ctx, c)
}

func (s *countedSandbox) Close() error {
	s.once.Do(func() { s.f.mu.Lock(); s.f.open--; s.f.mu.Unlock() })
	return s.Sandbox.Close()
}

func TestMaxRolloutsBoundsRolloutsAcrossGroups(t *testing.T) {
	inner, err := bwrap.New(context.Background(), bwrap.Config{})
	require.NoError(t, err)
	for _, limit := range []int{1, 3} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			sbs := &countingSandboxes{inner: inner}
			f := newFixture(t, func(c *agenticopd.Config) {
				c.SandboxFactory = sbs
				c.MaxRollouts = limit
				c.MaxGroups = 2
			})
			var out strings.Builder
			require.NoError(t, f.env.Process(context.Background(), 2, &out))
			// A rollout holds its own sandbox, and during verification a second one
			// for the tests.
			assert.LessOrEqual(t, sbs.maxOpen, 2*limit)
			assert.Positive(t, sbs.maxOpen)
			assert.Zero(t, sbs.open, "every sandbox closed")
		})
	}
}

func TestNewEnvRefusesBadConfig(t *testing.T) {
	sim := vllmtest.NewServer(t)
	for _, tc := range []struct {
		field string
		mod   func(*agenticopd.Config)
	}{
		{"Policy", func(c *agenticopd.Config) { c.Policy = nil }},
		{"GroupSize", func(c *agenticopd.Config) { c.GroupSize = -4 }},
		{"MaxTurns", func(c *agenticopd.Config) { c.MaxTurns = -1 }},
		{"MaxTokens", func(c *agenticopd.Config) { c.MaxTokens = -1 }},
		{"Temperature", func(c *agenticopd.Config) { c.Temperature = -0.5 }},
		{"DistillTopK", func(c *agenticopd.Config) { c.DistillTopK = -50 }},
		{"PRMVotes", func(c *agenticopd.Config) { c.PRMVotes = -3 }},
		{"HintMaxNextStateChars", func(c *agenticopd.Config) { c.HintMaxNextStateChars = -1 }},
		{"TeacherMaxLen", func(c *agenticopd.Config) { c.TeacherMaxLen = -1 }},
		{"MaxTokenLen", func(c *agenticopd.Config) { c.MaxTokenLen = -1 }},
		{"MaxRollouts", func(c *agenticopd.Config) { c.MaxRollouts = -1 }},
		{"MaxGroups", func(c *agenticopd.Config) { c.MaxGroups = -1 }},
		{"EvalSize", func(c *agenticopd.Config) { c.EvalSize = -2 }}, // -1 is tasks.NoEval
		{"EvalSplitRatio", func(c *agenticopd.Config) { c.EvalSplitRatio = 1 }},
		{"VerifyTimeout", func(c *agenticopd.Config) { c.VerifyTimeout = -time.Second }},
		{"PollInterval", func(c *agenticopd.Config) { c.PollInterval = -time.Second }},
		{"StatusTimeout", func(c *agenticopd.Config) { c.StatusTimeout = -time.Second }},
	} {
		t.Run(tc.field, func(t *testing.T) {
			cfg := agenticopd.Config{Policy: sim.Client()}
			tc.mod(&cfg)
			_, err := agenticopd.NewEnv(cfg)
			require.ErrorIs(t, err, agenticopd.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	_, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client()})
	require.NoError(t, err, "the zero value of every other field is a default")
}

func TestProcessAndServeRefuseBadArguments(t *testing.T) {
	f := newFixture(t, nil)
	var out strings.Builder
	require.Error(t, f.env.Process(context.Background(), -1, &out))
	require.Error(t, f.env.Process(context.Background(), 1, nil))
	require.NoError(t, f.env.Process(context.Background(), 0, &out))
	assert.Empty(t, out.String())
	assert.Zero(t, f.sim.RequestCount("/v1/completions"), "nothing was collected")
	require.Error(t, f.env.Serve(context.Background(), nil))
}

func TestCollectGroupOnAPool(t *testing.T) {
	// A *vllm.Pool is the policy, the teacher and the judge's model, as a *vllm.Client is.
	var sims []*vllmtest.Server
	var urls []string
	c := &coder{}
	for range 2 {
		sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(c.turn), vllmtest.WithChatScript(judgeScript))
		sims = append(sims, sim)
		urls = append(urls, sim.URL)
	}
	pool, err := vllm.NewPool(urls)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pool.Close()) })
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: pool, GroupSize: 2, DistillTopK: topK})
	require.NoError(t, err)
	g, err := env.CollectGroup(context.Background(), tasks.Builtin()[0])
	require.NoError(t, err)
	require.Empty(t, g.Dropped)
	require.NoError(t, g.Data.Validate(atropos.ValidateOptions{}))
	assert.Equal(t, 1, g.OPD.Metrics.RolloutsWithHint)
	assert.Positive(t, g.OPD.Metrics.ScoredTurns)
	chats, teacher := 0, 0
	for _, sim := range sims {
		chats += sim.RequestCount("/v1/chat/completions")
		for _, r := range sim.Requests() {
			if r.Path == "/v1/completions" && r.JSON["prompt_logprobs"] != nil {
				teacher++
			}
		}
	}
	assert.Equal(t, g.OPD.Metrics.Pairs, chats, "one judge request per turn pair, on the pool")
	assert.Equal(t, 1, teacher, "one teacher request, on the pool")
}

func TestProcessStopsWhenTheTeacherRefusesTopK(t *testing.T) {
	// The simulator allows 20 logprobs; one group at a time, every group has a fixing
	// rollout and so a hint, and every group would fail: Process stops at the first
	// instead of failing n+1 of them.
	f := newFixture(t, func(c *agenticopd.Config) { c.DistillTopK = 30; c.MaxGroups = 1 })
	var out strings.Builder
	err := f.env.Process(context.Background(), 3, &out)
	require.ErrorIs(t, err, vllm.ErrMaxLogprobs)
	assert.Contains(t, err.Error(), "DistillTopK")
	assert.Zero(t, out.Len(), "nothing written")
	m := f.env.Metrics()
	assert.Equal(t, float64(1), m["env/failed_groups"])
	// The refused request was made: the OPD count says so, as the request count does.
	assert.Equal(t, float64(1), m["requests/teacher_score"])
	assert.Equal(t, m["requests/teacher_score"], m["opd/teacher_requests"])
	assert.Positive(t, m["opd/teacher_prompt_tokens"])
}

func TestCollectGroupVerifiesEveryBuiltinTask(t *testing.T) {
	// The scripted coder ends every rollout with the task's reference solution, which
	// the full pipeline must score 1.0 against the visible and the hidden tests.
	f := newFixture(t, func(c *agenticopd.Config) { c.DisableOPD = true })
	for _, task := range tasks.Builtin() {
		t.Run(task.ID, func(t *testing.T) {
			g, err := f.env.CollectGroup(context.Background(), task)
			require.NoError(t, err)
			require.Len(t, g.Rollouts, 2)
			for _, r := range g.Rollouts {
				v := r.Verification
				require.Equal(t, reward.RulePassed, v.Rule, "%s\n%s\n%s", v.Reason, v.Output, v.SolutionOutput)
				require.Equal(t, 1.0, v.Correctness)
				require.True(t, v.Completed)
				require.Greater(t, v.Calls, strings.Count(task.TestCode, "assert "), "the hidden tests ran too")
				require.False(t, v.Unconfined)
				require.Equal(t, 1.0, r.Reward.Correctness)
			}
		})
	}
}

package agenticopd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// nemoGymRig is the NeMo Gym path end to end: the simulator behind the fake model
// server, the Env with a Policy through it, the agent server on loopback.
type nemoGymRig struct {
	sim   *vllmtest.Server
	model *nemogymtest.ModelServer
	env   *agenticopd.Env
	agent *nemogym.Server
	url   string
}

func newNemoGymRig(t *testing.T, mod func(*agenticopd.Config), srvMod func(*nemogym.Config)) *nemoGymRig {
	t.Helper()
	return newNemoGymRigWith(t, rigMods{}, mod, srvMod)
}

// rigMods change the fake model server's config and the policy's in a rig.
type rigMods struct {
	model  func(*nemogymtest.ModelConfig)
	policy func(*nemogym.PolicyConfig)
}

// newNemoGymRigWith is newNemoGymRig with the model server and the policy changed by
// rm.
func newNemoGymRigWith(t *testing.T, rm rigMods, mod func(*agenticopd.Config), srvMod func(*nemogym.Config)) *nemoGymRig {
	t.Helper()
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript((&coder{}).turn), vllmtest.WithChatScript(judgeScript))
	mcfg := nemogymtest.ModelConfig{Backend: sim.Client(), EOS: sim.Tokenize("<|im_end|>")[0], Temperature: 1, TopP: 1}
	if rm.model != nil {
		rm.model(&mcfg)
	}
	model := nemogymtest.NewModelServer(t, mcfg)
	tok, err := vllm.NewClient(model.URL)
	require.NoError(t, err)
	pcfg := nemogym.PolicyConfig{ModelURL: model.URL, Tokenizer: tok}
	if rm.policy != nil {
		rm.policy(&pcfg)
	}
	policy, err := nemogym.NewPolicy(pcfg)
	require.NoError(t, err)
	t.Cleanup(policy.CloseIdleConnections)
	cfg := agenticopd.Config{Policy: policy, Teacher: sim.Client(), JudgeModel: sim.Client(), GroupSize: 4, DistillTopK: topK, MaxRollouts: 8}
	if mod != nil {
		mod(&cfg)
	}
	env, err := agenticopd.NewEnv(cfg)
	require.NoError(t, err)
	scfg := nemogym.Config{Runner: env, Tasks: tasks.Builtin()}
	if srvMod != nil {
		srvMod(&scfg)
	}
	agent, err := nemogym.NewServer(scfg)
	require.NoError(t, err)
	hs := httptest.NewServer(agent)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		agent.Wait()
	})
	return &nemoGymRig{sim: sim, model: model, env: env, agent: agent, url: hs.URL}
}

func nemoGymRows(ts ...tasks.Task) []map[string]any {
	var rows []map[string]any
	for _, t := range ts {
		rows = append(rows, map[string]any{
			"responses_create_params": map[string]any{
				"input":       []any{map[string]any{"role": "user", "content": t.Statement}},
				"temperature": 1.0, "top_p": 1.0,
			},
			"task_id": t.ID,
		})
	}
	return rows
}

var nemoPlanRE = regexp.MustCompile(`Plan: (\w+)\.`)

// decoded is what the comparison reads of a /run answer.
type decoded struct {
	TaskID   string  `json:"task_id"`
	Reward   float64 `json:"reward"`
	Response struct {
		Output []nemogym.Item `json:"output"`
	} `json:"response"`
}

func (d decoded) plan() string {
	for _, it := range d.Response.Output {
		for _, c := range it.Content {
			if m := nemoPlanRE.FindStringSubmatch(c.Text); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

// TestNemoGymEndToEnd runs 2 tasks × 4 repeats through the agent server with NeMo
// Gym's standalone collector; every trainer check passes, and each rollout's reward,
// tokens and teacher rows equal those of the same scripted rollout on the Atropos
// path (CollectGroup on a policy talking to vLLM directly).
func TestNemoGymEndToEnd(t *testing.T) {
	t.Parallel() // long and mostly waiting: it overlaps the other long tests
	rig := newNemoGymRig(t, nil, nil)
	ts := tasks.Builtin()[:2]
	ctx := context.Background()
	col := nemogymtest.Collector{AgentURL: rig.url, Driver: nemogymtest.Standalone}
	runs, failures, err := col.Run(ctx, nemoGymRows(ts...), 4)
	require.NoError(t, err)
	require.Empty(t, failures)
	require.Len(t, runs, 8)
	require.NoError(t, nemogymtest.CheckGroups(runs, 4))
	for _, r := range runs {
		require.NoError(t, nemogymtest.CheckResult(r.Raw))
	}

	// The Atropos path, on a simulator of its own with the same scripted student.
	ref := newFixture(t, func(c *agenticopd.Config) { c.GroupSize = 4; c.MaxRollouts = 8; c.KeepEqualScores = true })
	type key struct{ task, plan string }
	want := map[key]struct {
		reward float64
		tokens []int32
		rows   [][]int32
		lps    [][]float32
	}{}
	for _, task := range ts {
		g, err := ref.env.CollectGroup(ctx, task)
		require.NoError(t, err)
		for s, r := range g.Rollouts {
			m := nemoPlanRE.FindStringSubmatch(r.Trajectory.Messages[2].Content)
			require.NotNil(t, m)
			var rows [][]int32
			var lps [][]float32
			for p := range r.Trajectory.Tokens {
				ids, l := g.Data.DistillRow(s, p)
				rows, lps = append(rows, ids), append(lps, l)
			}
			want[key{task.ID, m[1]}] = struct {
				reward float64
				tokens []int32
				rows   [][]int32
				lps    [][]float32
			}{r.Reward.Reward, r.Trajectory.Tokens, rows, lps}
		}
	}

	hinted := 0
	for _, r := range runs {
		var d decoded
		require.NoError(t, json.Unmarshal(r.Raw, &d))
		w, ok := want[key{d.TaskID, d.plan()}]
		require.True(t, ok, "task %s plan %q", d.TaskID, d.plan())
		require.Equal(t, w.reward, d.Reward, "task %s plan %s", d.TaskID, d.plan())
		for _, it := range d.Response.Output {
			if it.TokenInfo == nil {
				continue
			}
			start := len(it.PromptTokenIDs)
			end := start + len(it.GenerationTokenIDs)
			if diff := cmp.Diff(w.tokens[:end], append(append([]int32{}, it.PromptTokenIDs...), it.GenerationTokenIDs...)); diff != "" {
				t.Fatalf("task %s plan %s: tokens (-atropos +nemogym):\n%s", d.TaskID, d.plan(), diff)
			}
			require.NotNil(t, it.TeacherRows)
			for i := range it.GenerationTokenIDs {
				if len(it.TeacherRows.TokenIDs[i]) > 0 {
					hinted++
				}
				if diff := cmp.Diff(w.rows[start+i], it.TeacherRows.TokenIDs[i], cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("task %s plan %s token %d: teacher ids (-atropos +nemogym):\n%s", d.TaskID, d.plan(), start+i, diff)
				}
				if diff := cmp.Diff(w.lps[start+i], it.TeacherRows.Logprobs[i], cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("task %s plan %s token %d: teacher logprobs (-atropos +nemogym):\n%s", d.TaskID, d.plan(), start+i, diff)
				}
			}
		}
	}
	require.Positive(t, hinted, "the fixing rollouts have hinted turns")
}

// Process writes NeMo Gym rollouts lines through NemoGymOnGroup: one line per
// rollout, grouped by task index, each passing the trainer's checks, none carrying
// the task's hidden tests.
func TestProcessWritesNemoGymLines(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(answerScript("nemo")))
	var buf bytes.Buffer
	w := nemogym.NewWriter(&buf)
	env := fastEnv(t, sim.Client(), func(c *agenticopd.Config) {
		c.DisableOPD = true
		c.OnGroup = agenticopd.NemoGymOnGroup(w, *c)
	})
	require.NoError(t, env.Process(context.Background(), 3, io.Discard))
	require.NoError(t, w.Err())

	var runs []nemogymtest.Run
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		require.NoError(t, nemogymtest.CheckResult(line))
		var echoed struct {
			Task struct {
				ID          string  `json:"id"`
				HiddenTests *string `json:"hidden_tests"`
			} `json:"task"`
		}
		require.NoError(t, json.Unmarshal(line, &echoed))
		require.NotEmpty(t, echoed.Task.ID)
		require.Nil(t, echoed.Task.HiddenTests, "the hidden tests of task %s leaked into the rollouts line", echoed.Task.ID)
		var res map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(line, &res))
		runs = append(runs, nemogymtest.Run{Result: res, Raw: line})
	}
	require.Len(t, runs, 6)
	require.NoError(t, nemogymtest.CheckGroups(runs, 2))
}

// An Env with tools of its own: the agent server's session tells the policy which
// tools the agent renders, so the model server renders the same prompt.
func TestNemoGymCustomTools(t *testing.T) {
	var tools []rollout.Tool
	for _, tool := range rollout.DefaultTools() {
		if name := tool.Definition().Function.Name; name == "write_file" || name == "terminal" {
			tools = append(tools, tool)
		}
	}
	require.Len(t, tools, 2)
	rig := newNemoGymRig(t, func(c *agenticopd.Config) { c.Tools = tools; c.DisableOPD = true }, nil)
	col := nemogymtest.Collector{AgentURL: rig.url, Driver: nemogymtest.NeMoRL, Temperature: 1, TopP: 1}
	runs, _, err := col.Run(context.Background(), nemoGymRows(tasks.Builtin()[0]), 1)
	require.NoError(t, err)
	require.NoError(t, nemogymtest.CheckResult(runs[0].Raw))
}

// Every model call of a rollout whose row gives an id goes under NeMo Gym's
// /ng-rollout/<id>/ path prefix (real HTTP to the fake model server, which strips it
// and records the id), so that NeMo Gym's capture can attribute it; without an id
// (NeMo RL's rows), or with NoRolloutPrefix, the calls have no prefix.
func TestNemoGymModelCallsCarryTheRolloutPrefix(t *testing.T) {
	params := map[string]any{"input": "x", "temperature": 1.0, "top_p": 1.0}
	task := tasks.Builtin()[0]
	for _, tc := range []struct {
		name     string
		noPrefix bool
		driver   nemogymtest.Driver
		row      map[string]any // sent alone when set, else the collector sends 2 repeats
		want     []string       // the ids the calls carry, each at least once
	}{
		{name: "standalone collector", driver: nemogymtest.Standalone, want: []string{"0-0", "0-1"}},
		{name: "explicit id, second attempt", row: map[string]any{"responses_create_params": params, "task_id": task.ID,
			"_ng_rollout_id": "step12.t0", "_ng_task_index": 0, "_ng_rollout_index": 0, "_ng_attempt_index": 1},
			want: []string{"step12.t0-a1"}},
		{name: "NeMo RL rows have no id", driver: nemogymtest.NeMoRL, want: []string{""}},
		{name: "NoRolloutPrefix", noPrefix: true, driver: nemogymtest.Standalone, want: []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newNemoGymRigWith(t, rigMods{policy: func(c *nemogym.PolicyConfig) { c.NoRolloutPrefix = tc.noPrefix }},
				func(c *agenticopd.Config) { c.DisableOPD = true }, nil)
			if tc.row != nil {
				status, body, err := postRun(context.Background(), rig.url, tc.row)
				require.NoError(t, err)
				require.Equal(t, http.StatusOK, status, string(body))
				require.NoError(t, nemogymtest.CheckResult(body))
			} else {
				col := nemogymtest.Collector{AgentURL: rig.url, Driver: tc.driver, Temperature: 1, TopP: 1}
				runs, failures, err := col.Run(context.Background(), nemoGymRows(task), 2)
				require.NoError(t, err)
				require.Empty(t, failures)
				require.Len(t, runs, 2)
			}
			ids := rig.model.RolloutIDs()
			require.Len(t, ids, int(rig.model.Calls()), "every chat call is recorded")
			seen := map[string]int{}
			for _, id := range ids {
				seen[id]++
			}
			got := make([]string, 0, len(seen))
			for id := range seen {
				got = append(got, id)
			}
			require.ElementsMatch(t, tc.want, got, "calls per id: %v", seen)
		})
	}
}

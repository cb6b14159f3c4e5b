package agenticopd

import (
	"context"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/scorer"
)

// requestCounts counts the calls made to each role, reported as requests/NAME.
// Each call is also timed, in agenticopd_request_duration_seconds (see [Env.Collector]).
type requestCounts struct {
	render, generate, score, chat atomic.Int64

	latOnce sync.Once
	lat     *latencies
}

func (c *requestCounts) snapshot() map[string]float64 {
	return map[string]float64{
		"requests/render":        float64(c.render.Load()),
		"requests/generate":      float64(c.generate.Load()),
		"requests/teacher_score": float64(c.score.Load()),
		"requests/judge_chat":    float64(c.chat.Load()),
	}
}

type countedPolicy struct {
	p rollout.Policy
	c *requestCounts
}

func countPolicy(p rollout.Policy, c *requestCounts) rollout.Policy { return countedPolicy{p, c} }

func (p countedPolicy) Render(ctx context.Context, req rollout.RenderRequest) (rollout.Rendered, error) {
	p.c.render.Add(1)
	defer p.c.latency().since("render", time.Now())
	return p.p.Render(ctx, req)
}

func (p countedPolicy) Generate(ctx context.Context, req rollout.GenerateRequest) (rollout.Generation, error) {
	p.c.generate.Add(1)
	defer p.c.latency().since("generate", time.Now())
	return p.p.Generate(ctx, req)
}

func countScorer(s scorer.LogprobScorer, c *requestCounts) scorer.LogprobScorer {
	return scorer.Func(func(ctx context.Context, req scorer.Request) (scorer.Result, error) {
		c.score.Add(1)
		defer c.latency().since("teacher_score", time.Now())
		return s.Score(ctx, req)
	})
}

type countedChat struct {
	m   judge.ChatModel
	c   *requestCounts
	acc *accumulator
}

func countChat(m judge.ChatModel, c *requestCounts, acc *accumulator) judge.ChatModel {
	return countedChat{m, c, acc}
}

// Chat counts the request; as judge/empty_content every choice whose content is
// empty (a reasoning model that spent its budget thinking, behind a reasoning parser);
// and as judge/truncated_votes every choice of the N asked for that max_tokens cut
// (finish_reason "length"), whatever its content. The judge reads no vote from either.
func (m countedChat) Chat(ctx context.Context, req judge.ChatRequest) (judge.ChatResponse, error) {
	m.c.chat.Add(1)
	start := time.Now()
	resp, err := m.m.Chat(ctx, req)
	m.c.latency().since("judge_chat", start)
	empty, cut := 0, 0
	for _, c := range resp.Choices {
		if strings.TrimSpace(c) == "" {
			empty++
		}
	}
	for _, f := range resp.FinishReasons[:min(len(resp.FinishReasons), len(resp.Choices), max(req.N, 1))] {
		if f == "length" {
			cut++
		}
	}
	if empty > 0 {
		m.acc.count("judge/empty_content", float64(empty))
	}
	if cut > 0 {
		m.acc.count("judge/truncated_votes", float64(cut))
	}
	return resp, err
}

// accumulator sums metrics over the Env's life.
type accumulator struct {
	mu     sync.Mutex
	train  rewardSums
	opd    opd.Metrics
	stats  rollout.Stats
	counts map[string]float64
	// hist holds the reward terms' distributions for Prometheus ([Env.Collector]).
	hist *rewardHistograms
	// dropped counts the groups Serve dropped in a row (Config.MaxDroppedInARow).
	dropped dropStreak
}

type rewardSums struct {
	n                                          int
	reward, correctness, efficiency, toolUsage float64
	passed                                     int
	swe                                        sweSums
}

// sweSums sum the gradings of repository tasks' rollouts (reward.RepoResult).
type sweSums struct {
	n, resolved, testFileEdits int
	f2p, p2p                   float64
}

func (s *sweSums) add(r Rollout) {
	res := r.Verification.Repo
	if res == nil {
		return
	}
	s.n++
	if res.Resolved {
		s.resolved++
	}
	s.f2p += res.F2PRate
	s.p2p += res.P2PRate
	s.testFileEdits += res.TestFileEdits
}

// put sets swe/resolved_rate, swe/f2p_rate and swe/p2p_rate (means over the graded
// repository rollouts) and swe/test_file_edits (test files whose edits grading
// discarded, summed), when any rollout was graded.
func (s sweSums) put(m map[string]float64) {
	if s.n == 0 {
		return
	}
	n := float64(s.n)
	m["swe/resolved_rate"] = float64(s.resolved) / n
	m["swe/f2p_rate"] = s.f2p / n
	m["swe/p2p_rate"] = s.p2p / n
	m["swe/test_file_edits"] = float64(s.testFileEdits)
}

func (s *rewardSums) add(rs []Rollout) {
	for _, r := range rs {
		s.n++
		s.reward += r.Reward.Reward
		s.correctness += r.Reward.Correctness
		s.efficiency += r.Reward.Efficiency
		s.toolUsage += r.Reward.ToolUsage
		if passed(r) {
			s.passed++
		}
		s.swe.add(r)
	}
}

// passed is the reference's pass rule: correctness of at least 0.8.
func passed(r Rollout) bool { return r.Reward.Correctness >= 0.8 }

func (s rewardSums) put(m map[string]float64, prefix string) {
	if s.n == 0 {
		return
	}
	n := float64(s.n)
	m[prefix+"/mean_reward"] = s.reward / n
	m[prefix+"/mean_correctness"] = s.correctness / n
	m[prefix+"/pass_rate"] = float64(s.passed) / n
	if prefix == "train" {
		s.swe.put(m)
		m[prefix+"/mean_efficiency"] = s.efficiency / n
		m[prefix+"/mean_tool_usage"] = s.toolUsage / n
		m[prefix+"/total_rollouts"] = n
	}
}

func newAccumulator() *accumulator {
	return &accumulator{counts: map[string]float64{}, hist: newRewardHistograms()}
}

func (a *accumulator) addTrain(rs []Rollout) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.train.add(rs)
	a.hist.observe(rs)
}

func (a *accumulator) addOPD(m opd.Metrics) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.opd.Add(m)
}

func (a *accumulator) addStats(s rollout.Stats) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats = a.stats.Add(s)
}

func (a *accumulator) count(name string, v float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.counts[name] += v
}

func (a *accumulator) snapshot() map[string]float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := maps.Clone(a.counts)
	a.train.put(m, "train")
	maps.Copy(m, a.opd.Map())
	maps.Copy(m, a.stats.Metrics())
	return m
}

// groupMetrics returns the metrics of one group.
func groupMetrics(g *Group) map[string]float64 {
	m := map[string]float64{}
	if g.Dropped != DropPromptTooLong { // not scored, as in the original
		var s rewardSums
		s.add(g.Rollouts)
		s.put(m, "train")
	}
	var stats rollout.Stats
	for _, r := range g.Rollouts {
		stats = stats.Add(r.Stats)
	}
	maps.Copy(m, stats.Metrics())
	if g.Dropped == "" && len(g.OPD.Sequences) > 0 {
		maps.Copy(m, g.OPD.Metrics.Map())
	}
	return m
}

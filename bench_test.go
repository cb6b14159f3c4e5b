package agenticopd_test

// The performance benchmarks of the whole pipeline, on the shared fixture of
// internal/benchfixture. Run them with
//
//	go test -run '^$' -bench . .
//
// Counted figures (prefill-ratio, requests-ratio, payload-ratio) are deterministic;
// timed figures (overhead-pct, rollouts/s) depend on the machine and its load.

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/internal/benchfixture"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/sandboxtest"
	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// benchLatency is the latency the simulator adds to every request in the end-to-end
// benchmarks, and sandboxLatency the time every command of the test sandbox takes.
const (
	benchLatency   = 50 * time.Millisecond
	sandboxLatency = 20 * time.Millisecond
)

// fixtureRollout runs the fixture's rollout once in the test sandbox and returns its
// trajectory and the agent that ran it (whose Template renders hints on sim).
func fixtureRollout(b *testing.B, sim *vllmtest.Server) (*rollout.Trajectory, *rollout.Agent) {
	b.Helper()
	agent, err := rollout.NewAgent(sim.Client(), benchfixture.AgentConfig())
	require.NoError(b, err)
	sb, err := sandboxtest.New(sandboxtest.Config{Exec: benchfixture.Exec}).NewSandbox(b.Context())
	require.NoError(b, err)
	defer sb.Close()
	traj, err := agent.Run(b.Context(), benchfixture.Messages(), sb)
	require.NoError(b, err)
	require.Equal(b, rollout.StopNoToolCalls, traj.Stop)
	require.Len(b, opd.TrajectoryPairs(traj, 0), benchfixture.Pairs)
	return traj, agent
}

// hintEvery is a judge that hints every pair whose turn number is a multiple of
// every, with the fixture's hint, without any request.
func hintEvery(every int) judge.Judge {
	return judge.Func(func(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
		var n int
		if _, err := fmt.Sscanf(turn.Assistant.Content, "Step %d.", &n); err != nil || n%every != 0 {
			return judge.Hint{}, ctx.Err()
		}
		h := benchfixture.Hint(n)
		return judge.Hint{Text: h, Votes: []judge.Vote{{Score: 1, Hint: h}}}, ctx.Err()
	})
}

// echoTeacher answers every scored position with one entry, the student's token,
// without any request: the teacher's prompt is what these benchmarks count.
var echoTeacher = scorer.Func(func(ctx context.Context, req scorer.Request) (scorer.Result, error) {
	res := scorer.Result{Sequences: make([]scorer.SequenceResult, len(req.Sequences))}
	for s, seq := range req.Sequences {
		r := &res.Sequences[s]
		r.Positions = seq.Positions
		r.Offsets = make([]int32, len(seq.Positions)+1)
		r.TopIDs = make([]int32, len(seq.Positions))
		r.TopLogprobs = make([]float32, len(seq.Positions))
		r.TokenLogprobs = make([]float32, len(seq.Positions))
		for i, p := range seq.Positions {
			r.Offsets[i+1] = int32(i + 1)
			r.TopIDs[i] = seq.Tokens[p]
			r.TopLogprobs[i], r.TokenLogprobs[i] = -0.5, -0.5
		}
	}
	return res, ctx.Err()
})

// BenchmarkTeacherPrefill distills the fixture's rollout with every pair hinted, once
// with Inline placement and once with TaskPrompt placement (the original's), and
// counts the tokens of the teacher's prompts: Inline sends the rollout once, TaskPrompt
// the context of every hinted turn. Hints are rendered by the simulator's template;
// the teacher answers in-process (only its prompt is counted).
func BenchmarkTeacherPrefill(b *testing.B) {
	sim := vllmtest.NewServer(b, benchfixture.ServerOptions(1)...)
	traj, agent := fixtureRollout(b, sim)
	distillers := map[opd.Placement]*opd.Distiller{}
	for _, p := range []opd.Placement{opd.Inline, opd.TaskPrompt} {
		d, err := opd.New(opd.Config{Judge: hintEvery(1), Teacher: echoTeacher, Templater: agent.Template(),
			Renderer: agent.Template(), Placement: p, TopK: benchfixture.TopK})
		require.NoError(b, err)
		distillers[p] = d
	}
	var m [2]opd.Metrics
	for b.Loop() {
		for i, p := range []opd.Placement{opd.Inline, opd.TaskPrompt} {
			res, err := distillers[p].Distill(b.Context(), []*rollout.Trajectory{traj})
			require.NoError(b, err)
			m[i] = res.Metrics
		}
	}
	require.Equal(b, benchfixture.Pairs, m[0].ScoredTurns, "Inline scores every hinted turn")
	require.Equal(b, benchfixture.Pairs, m[1].ScoredTurns, "TaskPrompt scores every hinted turn")
	b.ReportMetric(float64(len(traj.Tokens)), "rollout-tokens")
	b.ReportMetric(float64(m[0].TeacherPromptTokens), "inline-teacher-tokens")
	b.ReportMetric(float64(m[1].TeacherPromptTokens), "taskprompt-teacher-tokens")
	b.ReportMetric(float64(m[1].TeacherPromptTokens)/float64(m[0].TeacherPromptTokens), "prefill-ratio")
}

// requestKinds counts the judge, teacher and hint-render requests in a simulator's log:
// judge requests are chat completions, teacher requests completions that ask for
// prompt_logprobs, hint renders /tokenize requests that carry a fixture hint.
func requestKinds(reqs []vllmtest.Request) (judgeReqs, teacherReqs, hintRenders int) {
	for _, r := range reqs {
		switch {
		case r.Path == "/v1/chat/completions":
			judgeReqs++
		case r.Path == "/v1/completions" && r.JSON["prompt_logprobs"] != nil:
			teacherReqs++
		case r.Path == "/tokenize" && bytes.Contains(r.Body, []byte("For step ")):
			hintRenders++
		}
	}
	return judgeReqs, teacherReqs, hintRenders
}

// BenchmarkRequestsPerRollout collects groups of one fixture rollout with every pair
// hinted, against the simulator with the LLM judge and the policy as teacher, and
// counts the judge and teacher requests in the simulator's log. The original sends
// PRMVotes judge requests per pair and one teacher request per hinted turn (3P + H);
// this library sends one judge request per pair (the votes as n) and one teacher
// request per group.
func BenchmarkRequestsPerRollout(b *testing.B) {
	sim := vllmtest.NewServer(b, benchfixture.ServerOptions(1)...)
	env, err := agenticopd.NewEnv(benchfixture.Config(sim.Client(), sandboxtest.New(sandboxtest.Config{Exec: benchfixture.Exec}), 1))
	require.NoError(b, err)
	var g *agenticopd.Group
	var judgeReqs, teacherReqs, hintRenders int
	for b.Loop() {
		sim.ResetRequests()
		g, err = env.CollectGroup(b.Context(), benchfixture.UnverifiedTask())
		require.NoError(b, err)
		judgeReqs, teacherReqs, hintRenders = requestKinds(sim.Requests())
	}
	m := g.OPD.Metrics
	require.Equal(b, benchfixture.Pairs, m.Pairs)
	require.Equal(b, benchfixture.Pairs, m.Hints, "every pair hinted")
	require.Equal(b, benchfixture.Pairs, m.ScoredTurns)
	original := benchfixture.PRMVotes*m.Pairs + m.Hints
	b.ReportMetric(float64(original), "original-requests")
	b.ReportMetric(float64(judgeReqs), "judge-requests")
	b.ReportMetric(float64(teacherReqs), "teacher-requests")
	b.ReportMetric(float64(hintRenders), "hint-tokenize-requests")
	b.ReportMetric(float64(original)/float64(judgeReqs+teacherReqs), "requests-ratio")
}

// distillBytes returns the distill_token_ids and distill_logprobs members of an
// encoded group (the encoder writes them last).
func distillBytes(b *testing.B, g *atropos.ScoredDataGroup, opts *atropos.EncodeOptions) []byte {
	b.Helper()
	data, err := g.AppendJSON(nil, opts)
	require.NoError(b, err)
	i := bytes.Index(data, []byte(`,"distill_token_ids":`))
	require.Positive(b, i)
	require.Equal(b, byte('}'), data[len(data)-1])
	return data[i+1 : len(data)-1]
}

func gzipLen(b *testing.B, data []byte) int {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(data)
	require.NoError(b, err)
	require.NoError(b, w.Close())
	return buf.Len()
}

// BenchmarkDistillPayload collects a group of four fixture rollouts with hints on every
// other pair (teacher rows from the simulator, K = 50), then encodes the group's
// distill fields both ways: ragged (a row only where the teacher was asked) and
// DenseZeroPad (the original's L×K layout). The sizes are those of the encoded bytes.
func BenchmarkDistillPayload(b *testing.B) {
	sim := vllmtest.NewServer(b, benchfixture.ServerOptions(2)...)
	env, err := agenticopd.NewEnv(benchfixture.Config(sim.Client(), sandboxtest.New(sandboxtest.Config{Exec: benchfixture.Exec}), 4))
	require.NoError(b, err)
	g, err := env.CollectGroup(b.Context(), benchfixture.UnverifiedTask())
	require.NoError(b, err)
	require.Equal(b, 4*(benchfixture.Pairs/2), g.OPD.Metrics.ScoredTurns, "hints on every other pair")
	var ragged, dense []byte
	b.ReportAllocs()
	for b.Loop() {
		ragged = distillBytes(b, g.Data, nil)
		dense = distillBytes(b, g.Data, &atropos.EncodeOptions{DenseZeroPad: benchfixture.TopK})
	}
	rz, dz := gzipLen(b, ragged), gzipLen(b, dense)
	b.ReportMetric(float64(len(ragged))/1e6, "ragged-MB")
	b.ReportMetric(float64(len(dense))/1e6, "dense-MB")
	b.ReportMetric(float64(len(dense))/float64(len(ragged)), "payload-ratio")
	b.ReportMetric(float64(rz)/1e6, "ragged-gzip-MB")
	b.ReportMetric(float64(dz)/1e6, "dense-gzip-MB")
	b.ReportMetric(float64(dz)/float64(rz), "payload-ratio-gzip")
}

// recorder wraps the judge and the teacher of an env and keeps their answers, so that
// the OPD post-processing can be run again without any request.
type recorder struct {
	mu      sync.Mutex
	judge   judge.Judge
	teacher scorer.LogprobScorer
	hints   map[string]judge.Hint
	result  scorer.Result
}

func turnKey(t judge.Turn) string { return t.Assistant.Content + "\x00" + t.NextState }

func (r *recorder) Judge(ctx context.Context, t judge.Turn) (judge.Hint, error) {
	h, err := r.judge.Judge(ctx, t)
	if err == nil {
		r.mu.Lock()
		r.hints[turnKey(t)] = h
		r.mu.Unlock()
	}
	return h, err
}

func (r *recorder) Score(ctx context.Context, req scorer.Request) (scorer.Result, error) {
	res, err := r.teacher.Score(ctx, req)
	r.mu.Lock()
	r.result = res
	r.mu.Unlock()
	return res, err
}

// replay answers as recorded.
func (r *recorder) replayJudge() judge.Judge {
	return judge.Func(func(ctx context.Context, t judge.Turn) (judge.Hint, error) {
		return r.hints[turnKey(t)], ctx.Err()
	})
}

func (r *recorder) replayTeacher() scorer.LogprobScorer {
	return scorer.Func(func(ctx context.Context, _ scorer.Request) (scorer.Result, error) { return r.result, ctx.Err() })
}

// cachedDeltas renders each hint once with tmpl and answers from memory afterwards.
type cachedDeltas struct {
	tmpl  opd.Templater
	mu    sync.Mutex
	cache map[string][]int32
}

func (c *cachedDeltas) Delta(ctx context.Context, msgs []chat.Message, gen bool) ([]int32, error) {
	key := fmt.Sprint(msgs, gen)
	c.mu.Lock()
	ids, ok := c.cache[key]
	c.mu.Unlock()
	if ok {
		return ids, nil
	}
	ids, err := c.tmpl.Delta(ctx, msgs, gen)
	if err == nil {
		c.mu.Lock()
		c.cache[key] = ids
		c.mu.Unlock()
	}
	return ids, err
}

// replayDistiller is a Distiller that answers with r's recordings and renders each
// hint once with sim's template.
func (r *recorder) replayDistiller(b *testing.B, sim *vllmtest.Server) *opd.Distiller {
	agent, err := rollout.NewAgent(sim.Client(), benchfixture.AgentConfig())
	require.NoError(b, err)
	deltas := &cachedDeltas{tmpl: agent.Template(), cache: map[string][]int32{}}
	d, err := opd.New(opd.Config{Judge: r.replayJudge(), Teacher: r.replayTeacher(), Templater: deltas, TopK: benchfixture.TopK})
	require.NoError(b, err)
	return d
}

// BenchmarkOPDPostProcess is the computation BenchmarkOPDOverhead times, alone and
// repeated, for profiling: a group of four fixture rollouts with hints on every other
// pair is collected once, then each iteration distills it again from the recorded
// judge and teacher answers (turn pairs, teacher sequences, alignment, rows), gives the
// rows to the group as the env does, and encodes it for the trajectory API, into the buffer of the iteration before, as
// atropos.Client.Send encodes into the buffers of its earlier sends.
func BenchmarkOPDPostProcess(b *testing.B) {
	sim := vllmtest.NewServer(b, benchfixture.ServerOptions(2)...)
	llm, err := judge.NewLLM(sim.Client(), judge.LLMConfig{PRMVotes: benchfixture.PRMVotes})
	require.NoError(b, err)
	rec := &recorder{judge: llm, teacher: sim.Client(), hints: map[string]judge.Hint{}}
	cfg := benchfixture.Config(sim.Client(), sandboxtest.New(sandboxtest.Config{Exec: benchfixture.Exec}), 4)
	cfg.Judge, cfg.Teacher = rec, rec
	env, err := agenticopd.NewEnv(cfg)
	require.NoError(b, err)
	g, err := env.CollectGroup(b.Context(), benchfixture.UnverifiedTask())
	require.NoError(b, err)
	trajs := make([]*rollout.Trajectory, len(g.Rollouts))
	for i, r := range g.Rollouts {
		trajs[i] = r.Trajectory
	}
	replay := rec.replayDistiller(b, sim)
	_, err = replay.Distill(b.Context(), trajs) // warm the hint cache
	require.NoError(b, err)
	b.ReportAllocs()
	var line []byte
	for b.Loop() {
		res, err := replay.Distill(b.Context(), trajs)
		require.NoError(b, err)
		require.Equal(b, g.OPD.Metrics.ScoredTurns, res.Metrics.ScoredTurns)
		require.NoError(b, env.AttachRows(g.Data, res))
		line, err = g.Data.AppendJSON(line[:0], nil)
		require.NoError(b, err)
	}
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkOPDOverhead collects groups of four fixture rollouts end to end, against the
// simulator with 50 ms latency per request and in the real sandbox, hints on every
// other pair, and measures the CPU time the library spends in its own OPD
// post-processing of each group: turn pairs, teacher sequences, alignment and rows
// (opd.Distiller.Distill run again on the group with the judge's and the teacher's
// recorded answers, so no request is made), the rows given to the group as the env
// gives them, plus encoding the group for the trajectory API (into the buffer of the
// group before, as atropos.Client.Send encodes into the buffers of its earlier sends).
// The time is the process's CPU time (getrusage) over that replay, while nothing else
// of the benchmark runs, garbage collection included. overhead-pct is that time over
// the group's wall time, for the groups after the first: the share an env pays per
// group as it runs. The first group, collected before them, pays once for what the
// process does a first time (the encoding buffer allocated and faulted in, code and
// data not yet in the caches); its post-processing is first-group-opd-post-ms.
func BenchmarkOPDOverhead(b *testing.B) {
	sim := vllmtest.NewServer(b, benchfixture.ServerOptions(2)...)
	sim.AddFault(vllmtest.Fault{Delay: benchLatency})
	sandboxes, err := bwrap.New(b.Context(), bwrap.Config{})
	if err != nil {
		b.Skipf("the bubblewrap sandbox is not available: %v", err)
	}
	llm, err := judge.NewLLM(sim.Client(), judge.LLMConfig{PRMVotes: benchfixture.PRMVotes})
	require.NoError(b, err)
	rec := &recorder{judge: llm, teacher: sim.Client(), hints: map[string]judge.Hint{}}
	cfg := benchfixture.Config(sim.Client(), sandboxes, 4)
	cfg.Judge, cfg.Teacher = rec, rec
	env, err := agenticopd.NewEnv(cfg)
	require.NoError(b, err)

	replay := rec.replayDistiller(b, sim)
	var line []byte
	// group collects a group and replays its post-processing, and returns the group's
	// wall time and the replay's CPU time.
	group := func() (wall, post time.Duration) {
		t0 := time.Now()
		g, err := env.CollectGroup(b.Context(), benchfixture.Task())
		require.NoError(b, err)
		wall = time.Since(t0)
		require.Equal(b, 4*(benchfixture.Pairs/2), g.OPD.Metrics.ScoredTurns)
		trajs := make([]*rollout.Trajectory, len(g.Rollouts))
		for i, r := range g.Rollouts {
			trajs[i] = r.Trajectory
		}
		if _, err := replay.Distill(b.Context(), trajs); err != nil { // warm the hint cache
			b.Fatal(err)
		}
		c1 := processCPU()
		res, err := replay.Distill(b.Context(), trajs)
		require.NoError(b, err)
		require.NoError(b, env.AttachRows(g.Data, res))
		line, err = g.Data.AppendJSON(line[:0], nil)
		require.NoError(b, err)
		post = processCPU() - c1
		require.Equal(b, g.OPD.Metrics.ScoredTurns, res.Metrics.ScoredTurns, "the replay does what the group did")
		return wall, post
	}
	_, first := group()

	var wall, post time.Duration
	var groups int
	for b.Loop() {
		w, p := group()
		wall, post, groups = wall+w, post+p, groups+1
	}
	b.ReportMetric(first.Seconds()*1e3, "first-group-opd-post-ms")
	b.ReportMetric(wall.Seconds()/float64(groups), "group-wall-s")
	b.ReportMetric(post.Seconds()*1e3/float64(groups), "opd-post-ms/group")
	b.ReportMetric(100*post.Seconds()/wall.Seconds(), "overhead-pct")
}

// BenchmarkPageTouchAfterIdle measures the machine rather than the library: the
// process's CPU time to read a byte of each 4 KiB page of a 16 MiB buffer it wrote just
// before, once at once (warm) and once after two seconds of sleep (after-idle). On
// some virtual machines the first access to a page the guest has not used for a
// second or so costs microseconds, which the guest counts as the CPU time of whatever
// touched it: a computation that starts after a group's waiting, as
// BenchmarkOPDOverhead's replay does, then pays for every page it reads or writes, and
// its figure exceeds BenchmarkOPDPostProcess's, whose memory stays warm.
func BenchmarkPageTouchAfterIdle(b *testing.B) {
	buf := make([]byte, 16<<20)
	var sink byte
	touch := func() time.Duration {
		c0 := processCPU()
		for i := 0; i < len(buf); i += 4096 {
			sink += buf[i]
		}
		return processCPU() - c0
	}
	var warm, idle time.Duration
	for b.Loop() {
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = byte(i)
		}
		warm += touch()
		time.Sleep(2 * time.Second)
		idle += touch()
	}
	pages := float64(b.N * len(buf) / 4096)
	b.ReportMetric(float64(warm.Microseconds())/pages, "warm-us/page")
	b.ReportMetric(float64(idle.Microseconds())/pages, "after-idle-us/page")
	if sink == 1 {
		b.Log(sink) // keeps the reads
	}
}

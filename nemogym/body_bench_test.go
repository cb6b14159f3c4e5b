package nemogym

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/tasks"
)

// policyStep is one model call of policyRollout: the messages sent, and how many
// calls came before.
type policyStep struct {
	msgs  []chat.Message
	calls int
}

// policyRollout is the Policy's side of a rollout of calls model calls: a prompt of
// promptLen tokens, each call generating gen tokens with one tool call whose result
// is result tokens long. It returns each call's messages and the token fields the
// server answers each call with.
func policyRollout(calls, promptLen, gen, result int) ([]policyStep, []TokenInfo) {
	msgs := []chat.Message{{Role: chat.RoleSystem, Content: "sys"}, {Role: chat.RoleUser, Content: strings.Repeat("task ", 200)}}
	var bundles []TokenInfo
	var tokens []int32
	grow := func(n int) {
		for i := range n {
			tokens = append(tokens, int32(1000+i))
		}
	}
	grow(promptLen)
	var steps []policyStep
	for c := range calls {
		steps = append(steps, policyStep{msgs: msgs, calls: len(bundles)})
		start := len(tokens)
		grow(gen)
		lps := make([]float32, gen)
		for i := range lps {
			lps[i] = -0.25 - float32(i%7)/3
		}
		bundles = append(bundles, TokenInfo{PromptTokenIDs: tokens[:start:start], GenerationTokenIDs: tokens[start:len(tokens):len(tokens)], GenerationLogProbs: lps})
		id := fmt.Sprintf("call_%d_0", c)
		msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("thinking ", 40),
			ToolCalls: []chat.ToolCall{{ID: id, Type: "function", Function: chat.FunctionCall{Name: "terminal", Arguments: `{"command":"ls"}`}}}},
			chat.Message{Role: chat.RoleTool, ToolCallID: id, Content: strings.Repeat("output line\n", result/3)})
		grow(result)
	}
	return steps, bundles
}

// buildRequests is the Policy's own work for the requests of one rollout, as
// Generate does it: each call's body, and, when the call returns, its token fields.
// It returns the bodies' total length.
func buildRequests(tb testing.TB, p *Policy, steps []policyStep, bundles []TokenInfo) int {
	s := NewSession(Sampling{})
	size := 0
	for c, st := range steps {
		if st.calls != len(s.frags) {
			tb.Fatalf("step %d follows %d calls, the session has %d", c, st.calls, len(s.frags))
		}
		msgs, err := s.enc.messages(st.msgs, s.frags)
		if err != nil {
			tb.Fatal(err)
		}
		body, err := p.body(rollout.GenerateRequest{MaxTokens: 1024, Sampling: sampling.Neutral(1)}, Sampling{}, msgs, nil, nil)
		if err != nil {
			tb.Fatal(err)
		}
		size += body.Len()
		if err := s.record(bundles[c], c); err != nil {
			tb.Fatal(err)
		}
	}
	return size
}

// BenchmarkPolicyRequests is the Policy's own work for the requests of one rollout:
// every call's body, each replaying every earlier call's token fields (15 calls, a
// 1,500-token prompt, 600 generated and 400 tool tokens per call: 16k tokens at the
// end). %_of_rollout relates it to 15 model calls of 50 ms.
func BenchmarkPolicyRequests(b *testing.B) {
	const calls, promptLen, gen, result = 15, 1500, 600, 400
	steps, bundles := policyRollout(calls, promptLen, gen, result)
	p, err := NewPolicy(PolicyConfig{ModelURL: "http://127.0.0.1:1", Tokenizer: nil})
	if err == nil || p != nil {
		b.Fatal("NewPolicy accepted no tokenizer")
	}
	p = &Policy{cfg: PolicyConfig{Tools: nil}}
	size := 0
	b.ReportAllocs()
	for b.Loop() {
		size = buildRequests(b, p, steps, bundles)
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(100*float64(per)/float64(calls*50*time.Millisecond), "%_of_rollout")
	b.ReportMetric(float64(size), "request_bytes")
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRolloutOverhead is what the agent server and the Policy together add to
// one rollout of 15 model calls (a 1,500-token prompt, 600 generated and 400 tool
// tokens per call, every call hinted: teacher rows of 8 entries on every generated
// token), in CPU time, garbage collection included: the server's answer to the /run
// (BenchmarkServerOverhead/15calls_16k_tokens_allhinted) and the Policy's request
// bodies (BenchmarkPolicyRequests). %_of_rollout relates their sum to 15 model calls
// of 50 ms; server-% and policy-% are the parts.
func BenchmarkRolloutOverhead(b *testing.B) {
	const calls, promptLen, gen, result, k = 15, 1500, 600, 400, 8
	steps, bundles := policyRollout(calls, promptLen, gen, result)
	p := &Policy{cfg: PolicyConfig{Tools: nil}}
	out := syntheticOutcome(calls, promptLen, gen, result, k, calls)
	s, err := NewServer(Config{Runner: RunnerFunc(func(context.Context, tasks.Task) (Outcome, error) {
		return out, nil
	}), KeepBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Wait()
	row := `{"responses_create_params":{"input":"q","temperature":1.0,"top_p":1.0},"task":{"id":"t","statement":"Say a."},"_ng_task_index":0}`
	var serverCPU, policyCPU time.Duration
	b.ReportAllocs()
	for b.Loop() {
		c0 := processCPU()
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/run", strings.NewReader(row)))
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
		c1 := processCPU()
		buildRequests(b, p, steps, bundles)
		c2 := processCPU()
		serverCPU += c1 - c0
		policyCPU += c2 - c1
	}
	rolloutTime := float64(calls * 50 * time.Millisecond)
	n := float64(b.N)
	b.ReportMetric(100*float64(serverCPU+policyCPU)/n/rolloutTime, "%_of_rollout")
	b.ReportMetric(100*float64(serverCPU)/n/rolloutTime, "server-%")
	b.ReportMetric(100*float64(policyCPU)/n/rolloutTime, "policy-%")
	b.ReportMetric(serverCPU.Seconds()*1e3/n, "server-cpu-ms/op")
	b.ReportMetric(policyCPU.Seconds()*1e3/n, "policy-cpu-ms/op")
}

// syntheticOutcome is a rollout of calls model calls: a prompt of promptLen tokens,
// each call generating gen tokens with one tool call whose result is result tokens
// long, and teacher rows of k entries on every generated token of the first hinted
// calls.
func syntheticOutcome(calls, promptLen, gen, result, k, hinted int) Outcome {
	t := &rollout.Trajectory{Messages: []chat.Message{{Role: chat.RoleSystem, Content: "sys"}, {Role: chat.RoleUser, Content: strings.Repeat("task ", 200)}}}
	add := func(n int, lp float32) {
		for i := range n {
			t.Tokens = append(t.Tokens, int32(1000+i%50000))
			t.Logprobs = append(t.Logprobs, lp)
		}
	}
	add(promptLen, 0)
	for c := range calls {
		start := len(t.Tokens)
		add(gen, -0.4)
		id := fmt.Sprintf("call_%d_0", c)
		t.Turns = append(t.Turns, rollout.Turn{Message: len(t.Messages), Start: start, End: len(t.Tokens)})
		t.Messages = append(t.Messages,
			chat.Message{Role: chat.RoleAssistant, Content: strings.Repeat("thinking ", 40),
				ToolCalls: []chat.ToolCall{{ID: id, Type: "function", Function: chat.FunctionCall{Name: "terminal", Arguments: `{"command":"python test_solution.py"}`}}}},
			chat.Message{Role: chat.RoleTool, ToolCallID: id, Name: "terminal", Content: strings.Repeat("output line\n", result/3)})
		add(result, 0)
	}
	rows := opd.Rows{Offsets: make([]int32, len(t.Tokens)+1), TokenLogprobs: make([]float32, len(t.Tokens))}
	limit := len(t.Tokens)
	if hinted < calls {
		limit = t.Turns[hinted].Start
	}
	for p := range t.Tokens {
		if t.Logprobs[p] != 0 && p < limit {
			for j := range k {
				rows.IDs = append(rows.IDs, int32(j+7))
				rows.Logprobs = append(rows.Logprobs, -0.1*float32(j+1))
			}
		}
		rows.Offsets[p+1] = int32(len(rows.IDs))
	}
	return Outcome{Trajectory: t, Rows: &rows, Reward: 0.85,
		Components: map[string]float64{"correctness": 0.7, "efficiency": 0.15, "tool_use": 0}}
}

// SyntheticOutcome is syntheticOutcome, for the external tests.
var SyntheticOutcome = syntheticOutcome

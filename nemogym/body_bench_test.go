package nemogym

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
)

// BenchmarkPolicyRequests is the Policy's own work for the requests of one rollout:
// every call's body, each replaying every earlier call's token fields (15 calls, a
// 1,500-token prompt, 600 generated and 400 tool tokens per call: 16k tokens at the
// end). %_of_rollout relates it to 15 model calls of 50 ms.
func BenchmarkPolicyRequests(b *testing.B) {
	const calls, promptLen, gen, result = 15, 1500, 600, 400
	msgs := []chat.Message{{Role: chat.RoleSystem, Content: "sys"}, {Role: chat.RoleUser, Content: strings.Repeat("task ", 200)}}
	var bundles []TokenInfo
	var tokens []int32
	grow := func(n int) {
		for i := range n {
			tokens = append(tokens, int32(1000+i))
		}
	}
	grow(promptLen)
	type step struct {
		msgs  []chat.Message
		calls int
	}
	var steps []step
	for c := range calls {
		steps = append(steps, step{msgs: msgs, calls: len(bundles)})
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
	p, err := NewPolicy(PolicyConfig{ModelURL: "http://127.0.0.1:1", Tokenizer: nil})
	if err == nil || p != nil {
		b.Fatal("NewPolicy accepted no tokenizer")
	}
	p = &Policy{cfg: PolicyConfig{Tools: nil}}
	size := 0
	b.ReportAllocs()
	for b.Loop() {
		size = 0
		// Each call's token fields are written once, when the call returns.
		frags := make([][]byte, len(bundles))
		for i, t := range bundles {
			if frags[i], err = tokenMembers(t); err != nil {
				b.Fatal(err)
			}
		}
		for _, s := range steps {
			cm, err := withTokens(s.msgs, frags[:s.calls])
			if err != nil {
				b.Fatal(err)
			}
			body, err := p.body(rollout.GenerateRequest{MaxTokens: 1024, Sampling: sampling.Neutral(1)}, Sampling{}, cm, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			size += len(body)
		}
	}
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(100*float64(per)/float64(calls*50*time.Millisecond), "%_of_rollout")
	b.ReportMetric(float64(size), "request_bytes")
}

package nemogym_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// syntheticOutcome is a rollout of calls model calls: a prompt of promptLen tokens,
// each call generating gen tokens with one tool call whose result is result tokens
// long, and teacher rows of k entries on every generated token of the first hinted
// calls.
func syntheticOutcome(calls, promptLen, gen, result, k, hinted int) nemogym.Outcome {
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
	return nemogym.Outcome{Trajectory: t, Rows: &rows, Reward: 0.85,
		Components: map[string]float64{"correctness": 0.7, "efficiency": 0.15, "tool_use": 0}}
}

// BenchmarkServerOverhead is the agent server's own work per rollout, beyond the
// rollout: reading the row, building the output items with token fields and teacher
// rows, encoding and writing the answer. %_of_rollout relates it to a rollout whose
// model calls take 50 ms each (the target: under 1%).
func BenchmarkServerOverhead(b *testing.B) {
	for _, sz := range []struct {
		name                               string
		calls, prompt, gen, result, hinted int
	}{
		{"5calls_4k_tokens_2hinted", 5, 1000, 300, 300, 2},
		{"5calls_4k_tokens_allhinted", 5, 1000, 300, 300, 5},
		{"15calls_16k_tokens_3hinted", 15, 1500, 600, 400, 3},
		{"15calls_16k_tokens_allhinted", 15, 1500, 600, 400, 15},
	} {
		b.Run(sz.name, func(b *testing.B) {
			out := syntheticOutcome(sz.calls, sz.prompt, sz.gen, sz.result, 8, sz.hinted)
			s, err := nemogym.NewServer(nemogym.Config{Runner: nemogym.RunnerFunc(func(context.Context, tasks.Task) (nemogym.Outcome, error) {
				return out, nil
			}), KeepBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			row := `{"responses_create_params":{"input":"q","temperature":1.0,"top_p":1.0},"task":{"id":"t","statement":"Say a."},"_ng_task_index":0}`
			bytesOut := 0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/run", strings.NewReader(row)))
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
				}
				bytesOut = rec.Body.Len()
			}
			b.StopTimer()
			per := b.Elapsed() / time.Duration(b.N)
			rolloutTime := time.Duration(sz.calls) * 50 * time.Millisecond
			b.ReportMetric(100*float64(per)/float64(rolloutTime), "%_of_rollout")
			b.ReportMetric(float64(bytesOut), "answer_bytes")
			s.Wait()
		})
	}
}

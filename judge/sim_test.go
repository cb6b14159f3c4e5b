package judge_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// thinkingOnlyJudge scripts the simulator's thinking-only model (its template opens a
// thought in the prompt whatever enable_thinking says): the output starts mid-thought,
// drafts a decision and a hint, thinks on at length, closes the thought and answers.
// It records the prompts it was given.
type thinkingOnlyJudge struct {
	answer  string
	mu      sync.Mutex
	prompts []string
}

func (j *thinkingOnlyJudge) script(in vllmtest.ChatScriptInput) []string {
	j.mu.Lock()
	j.prompts = append(j.prompts, in.Prompt)
	j.mu.Unlock()
	more := strings.Repeat(" Let me reread the tool output line by line and weigh it once more.", 40)
	return []string{draft + more + "</think>\n\n" + j.answer}
}

// TestLLMThinkingJudgeOnSimulator runs the judge through the real vLLM client against
// the simulator playing a thinking-only judge model, with and without a reasoning
// parser. Cut at max_tokens (finish_reason "length"), the thought drafted so far is
// never a vote; given the room to finish, only the answer after </think> is.
func TestLLMThinkingJudgeOnSimulator(t *testing.T) {
	tests := []struct {
		name      string
		parser    bool
		maxTokens int
		answer    string
		want      judge.Vote // every vote, without Raw
		wantHint  string
	}{
		{"cut mid-thought", false, 120, `\boxed{-1}`, judge.Vote{Unparsed: judge.UnparsedTruncated}, ""},
		{"finished, negative", false, 4000, `\boxed{-1}`, judge.Vote{Score: -1}, ""},
		{"finished without a decision", false, 4000, `I am not sure.`, judge.Vote{Unparsed: judge.UnparsedNoDecision}, ""},
		{"finished, positive", false, 4000, pos2, judge.Vote{Score: 1, Hint: "Run the tests before reporting success to the user."}, "Run the tests before reporting success to the user."},
		{"reasoning parser, cut mid-thought", true, 120, `\boxed{-1}`, judge.Vote{Unparsed: judge.UnparsedTruncated}, ""},
		{"reasoning parser, finished without a decision", true, 4000, `I am not sure.`, judge.Vote{Unparsed: judge.UnparsedNoDecision}, ""},
		{"reasoning parser, finished, positive", true, 4000, pos2, judge.Vote{Score: 1, Hint: "Run the tests before reporting success to the user."}, "Run the tests before reporting success to the user."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &thinkingOnlyJudge{answer: tt.answer}
			opts := []vllmtest.Option{vllmtest.WithThinkingOnlyTemplate(), vllmtest.WithChatScript(m.script)}
			if tt.parser {
				opts = append(opts, vllmtest.WithReasoningParser())
			}
			sim := vllmtest.NewServer(t, opts...)
			h, err := newLLM(t, sim.Client(), judge.LLMConfig{MaxTokens: tt.maxTokens}).Judge(context.Background(), turn)
			require.NoError(t, err)
			require.Len(t, h.Votes, judge.DefaultPRMVotes)
			require.Equal(t, 1, sim.RequestCount("/v1/chat/completions"), "all votes in one request")
			for _, r := range sim.Requests() {
				require.Equal(t, map[string]any{"enable_thinking": false}, r.JSON["chat_template_kwargs"], "the judge asked for no thinking")
			}
			for _, p := range m.prompts {
				require.True(t, strings.HasSuffix(p, "<|im_start|>assistant\n<think>\n"), "the template opened a thought anyway: %q", p[max(0, len(p)-60):])
			}
			cut := tt.maxTokens < 1000
			for i, v := range h.Votes {
				if !tt.parser {
					require.Contains(t, v.Raw, "[HINT_END]", "vote %d: the draft hint reached the judge as content", i)
					require.Equal(t, cut, !strings.Contains(v.Raw, "</think>"), "vote %d: cut mid-thought, or whole", i)
				}
				v.Raw = ""
				if diff := cmp.Diff(tt.want, v); diff != "" {
					t.Errorf("vote %d (-want +got):\n%s", i, diff)
				}
			}
			require.Equal(t, tt.wantHint, h.Text)
		})
	}
}

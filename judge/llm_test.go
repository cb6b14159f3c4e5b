package judge_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/judge/judgetest"
	"github.com/agentic-opd/agenticopd/sampling"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeModel answers each request with up to maxChoices of the scripted outputs, in
// turn, and records the requests.
type fakeModel struct {
	mu         sync.Mutex
	outputs    []string
	next       int
	maxChoices int // 0: as many as asked
	fail       func(req judge.ChatRequest, call int) error
	reqs       []judge.ChatRequest
}

func (m *fakeModel) Chat(ctx context.Context, req judge.ChatRequest) (judge.ChatResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	if err := ctx.Err(); err != nil {
		return judge.ChatResponse{}, err
	}
	if m.fail != nil {
		if err := m.fail(req, len(m.reqs)); err != nil {
			return judge.ChatResponse{}, err
		}
	}
	n := req.N
	if m.maxChoices > 0 {
		n = min(n, m.maxChoices)
	}
	var resp judge.ChatResponse
	for range n {
		resp.Choices = append(resp.Choices, m.outputs[m.next%len(m.outputs)])
		resp.FinishReasons = append(resp.FinishReasons, "stop")
		m.next++
	}
	return resp, nil
}

func (m *fakeModel) requests() []judge.ChatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]judge.ChatRequest(nil), m.reqs...)
}

const (
	pos1 = `\boxed{1} [HINT_START]Check fizzbuzz(0) returns an empty list.[HINT_END]`
	pos2 = `\boxed{1} [HINT_START]Run the tests before reporting success to the user.[HINT_END]`
	neg  = `The call was fine. \boxed{-1}`
)

var turn = judgetest.SampleTurns()[1]

func newLLM(t *testing.T, m judge.ChatModel, cfg judge.LLMConfig) *judge.LLM {
	t.Helper()
	j, err := judge.NewLLM(m, cfg)
	require.NoError(t, err)
	return j
}

func TestLLMOneRequestForAllVotes(t *testing.T) {
	m := &fakeModel{outputs: []string{pos1, neg, pos2}}
	j := newLLM(t, m, judge.LLMConfig{})
	h, err := j.Judge(context.Background(), turn)
	require.NoError(t, err)

	reqs := m.requests()
	require.Len(t, reqs, 1)
	want := judge.ChatRequest{
		Messages: j.Prompt(turn), N: 3, MaxTokens: 500,
		Sampling:           sampling.Params{Temperature: 0.7, TopP: 1, TopK: -1, RepetitionPenalty: 1},
		ChatTemplateKwargs: map[string]any{"enable_thinking": false},
	}
	if diff := cmp.Diff(want, reqs[0]); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	wantHint := judge.Hint{
		Text:  "Run the tests before reporting success to the user.",
		Votes: []judge.Vote{judge.ParseVote(pos1), judge.ParseVote(neg), judge.ParseVote(pos2)},
	}
	if diff := cmp.Diff(wantHint, h); diff != "" {
		t.Errorf("hint (-want +got):\n%s", diff)
	}
}

func TestLLMFallsBackToSeparateRequests(t *testing.T) {
	m := &fakeModel{outputs: []string{neg, pos1, pos1, neg, pos1}, maxChoices: 1}
	j := newLLM(t, m, judge.LLMConfig{PRMVotes: 5})
	h, err := j.Judge(context.Background(), turn)
	require.NoError(t, err)

	reqs := m.requests()
	require.Len(t, reqs, 5, "one request for n=5, then one for each of the 4 missing votes")
	require.Equal(t, 5, reqs[0].N)
	for _, r := range reqs[1:] {
		require.Equal(t, 1, r.N)
	}
	require.Len(t, h.Votes, 5)
	require.Equal(t, judge.ParseVote(neg), h.Votes[0], "the first vote comes from the first request")
	pos, negs := 0, 0
	for _, v := range h.Votes {
		switch v.Score {
		case 1:
			pos++
		case -1:
			negs++
		}
	}
	require.Equal(t, 3, pos)
	require.Equal(t, 2, negs)
	require.Equal(t, "Check fizzbuzz(0) returns an empty list.", h.Text)
}

func TestLLMExtraChoicesAreIgnored(t *testing.T) {
	m := &fakeModel{outputs: []string{pos1, pos1, pos1, neg, neg}}
	many := judge.ChatModel(chatFunc(func(ctx context.Context, req judge.ChatRequest) (judge.ChatResponse, error) {
		req.N = 5
		return m.Chat(ctx, req)
	}))
	h, err := newLLM(t, many, judge.LLMConfig{}).Judge(context.Background(), turn)
	require.NoError(t, err)
	require.Len(t, h.Votes, 3)
}

type chatFunc func(ctx context.Context, req judge.ChatRequest) (judge.ChatResponse, error)

func (f chatFunc) Chat(ctx context.Context, req judge.ChatRequest) (judge.ChatResponse, error) {
	return f(ctx, req)
}

func TestLLMFailuresBecomeUnparsedVotes(t *testing.T) {
	boom := errors.New("503 service unavailable")
	tests := []struct {
		name  string
		model *fakeModel
		want  []string // Unparsed reason per vote
	}{
		{
			name:  "first request fails",
			model: &fakeModel{outputs: []string{pos1}, fail: func(judge.ChatRequest, int) error { return boom }},
			want:  []string{judge.UnparsedRequestFailed, judge.UnparsedRequestFailed, judge.UnparsedRequestFailed},
		},
		{
			name: "a separate request fails",
			model: &fakeModel{outputs: []string{pos1}, maxChoices: 1, fail: func(_ judge.ChatRequest, call int) error {
				if call == 3 {
					return boom
				}
				return nil
			}},
			// The separate requests run concurrently: which vote fails is not fixed.
			want: []string{"", "", judge.UnparsedRequestFailed},
		},
		{
			name:  "unreadable output",
			model: &fakeModel{outputs: []string{"I think it is fine.", pos1, `\boxed{3}`}},
			want:  []string{judge.UnparsedNoDecision, "", judge.UnparsedBadDecision}, // votes 1.. sorted
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := newLLM(t, tt.model, judge.LLMConfig{Selection: judge.LongestPositive}).Judge(context.Background(), turn)
			require.NoError(t, err)
			var got []string
			for _, v := range h.Votes {
				got = append(got, v.Unparsed)
			}
			slices.Sort(got[1:])
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			require.NoError(t, judgetest.CheckHint(h))
		})
	}
}

func TestLLMMissingChoice(t *testing.T) {
	calls := 0
	var mu sync.Mutex
	m := chatFunc(func(ctx context.Context, req judge.ChatRequest) (judge.ChatResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return judge.ChatResponse{Choices: []string{pos1}, FinishReasons: []string{"stop"}}, nil
		}
		return judge.ChatResponse{}, nil
	})
	h, err := newLLM(t, m, judge.LLMConfig{}).Judge(context.Background(), turn)
	require.NoError(t, err)
	require.Equal(t, 3, calls)
	require.Equal(t, []string{"", judge.UnparsedMissingChoice, judge.UnparsedMissingChoice},
		[]string{h.Votes[0].Unparsed, h.Votes[1].Unparsed, h.Votes[2].Unparsed})
	require.Equal(t, "Check fizzbuzz(0) returns an empty list.", h.Text, "one positive, no negative votes")
}

func TestLLMContextEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := chatFunc(func(context.Context, judge.ChatRequest) (judge.ChatResponse, error) {
		cancel()
		return judge.ChatResponse{}, errors.New("connection reset")
	})
	_, err := newLLM(t, m, judge.LLMConfig{}).Judge(ctx, turn)
	require.ErrorIs(t, err, context.Canceled, "a failure while ctx ends is ctx's error, not unparsed votes")
}

func TestLLMConfig(t *testing.T) {
	m := &fakeModel{outputs: []string{neg}}
	tests := []struct {
		name string
		cfg  judge.LLMConfig
		want judge.ChatRequest
	}{
		{
			"greedy", judge.LLMConfig{Sampling: sampling.Params{Temperature: -1}, PRMVotes: 1, MaxTokens: 4096},
			judge.ChatRequest{N: 1, Sampling: sampling.Neutral(0), MaxTokens: 4096, ChatTemplateKwargs: noThinking},
		},
		{
			"explicit", judge.LLMConfig{Sampling: sampling.Params{Temperature: 0.6, TopK: 20, TopP: 0.95}, PRMVotes: 2},
			judge.ChatRequest{N: 2, Sampling: sampling.Params{Temperature: 0.6, TopP: 0.95, TopK: 20, RepetitionPenalty: 1}, MaxTokens: 500, ChatTemplateKwargs: noThinking},
		},
		{
			"thinking left to the template", judge.LLMConfig{ChatTemplateKwargs: map[string]any{}},
			judge.ChatRequest{N: 3, Sampling: sampling.Neutral(0.7), MaxTokens: 500, ChatTemplateKwargs: map[string]any{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m.reqs = nil
			_, err := newLLM(t, m, tt.cfg).Judge(context.Background(), turn)
			require.NoError(t, err)
			got := m.requests()[0]
			got.Messages = nil
			require.Equal(t, tt.want, got)
		})
	}
}

var noThinking = map[string]any{"enable_thinking": false}

// reasoningModel answers like vLLM with a reasoning parser when the model thought
// through its whole budget: content null, the decision only in the reasoning.
type reasoningModel struct{ content []string }

func (m reasoningModel) Chat(_ context.Context, req judge.ChatRequest) (judge.ChatResponse, error) {
	var resp judge.ChatResponse
	for i := range req.N {
		resp.Choices = append(resp.Choices, m.content[i%len(m.content)])
		resp.Reasoning = append(resp.Reasoning, `The turn looks wrong, so \boxed{1} [HINT_START]Think harder about it.[HINT_END]`)
		resp.FinishReasons = append(resp.FinishReasons, "stop")
	}
	return resp, nil
}

func TestLLMEmptyContentIsNeverAVote(t *testing.T) {
	j := newLLM(t, reasoningModel{content: []string{"", neg, " \n"}}, judge.LLMConfig{PRMVotes: 3, Selection: judge.LongestPositive})
	h, err := j.Judge(context.Background(), turn)
	require.NoError(t, err)
	require.Empty(t, h.Text, "the reasoning's \\boxed{1} and hint are not read")
	got := make([]string, len(h.Votes))
	for i, v := range h.Votes {
		got[i] = v.Unparsed
	}
	require.Equal(t, []string{judge.UnparsedEmptyContent, "", judge.UnparsedEmptyContent}, got)
	require.Equal(t, -1, h.Votes[1].Score, "a choice with content is parsed as usual")
}

func TestNewLLMErrors(t *testing.T) {
	m := &fakeModel{outputs: []string{neg}}
	tests := []struct {
		name  string
		model judge.ChatModel
		cfg   judge.LLMConfig
	}{
		{"nil model", nil, judge.LLMConfig{}},
		{"negative votes", m, judge.LLMConfig{PRMVotes: -1}},
		{"negative max tokens", m, judge.LLMConfig{MaxTokens: -5}},
		{"top_p above 1", m, judge.LLMConfig{Sampling: sampling.Params{TopP: 1.5}}},
		{"negative repetition penalty", m, judge.LLMConfig{Sampling: sampling.Params{RepetitionPenalty: -1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := judge.NewLLM(tt.model, tt.cfg)
			require.ErrorIs(t, err, judge.ErrInvalidConfig)
		})
	}
}

func TestLLMPrompt(t *testing.T) {
	j := newLLM(t, &fakeModel{outputs: []string{neg}}, judge.LLMConfig{MaxToolCallChars: 12})
	call := func(name, args string) chat.ToolCall {
		return chat.ToolCall{ID: "c", Type: "function", Function: chat.FunctionCall{Name: name, Arguments: args}}
	}
	tests := []struct {
		name      string
		assistant chat.Message
		response  string
	}{
		{"text only", chat.Message{Role: "assistant", Content: "All done."}, "All done."},
		{"tool call only", chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{call("terminal", `{"command":"ls"}`)}},
			"[tool call: terminal] {\"command\":\"\n...[truncated]"},
		{"text and two calls", chat.Message{Role: "assistant", Content: "Writing it.",
			ToolCalls: []chat.ToolCall{call("write_file", `{}`), call("terminal", `{"c":"x"}`)}},
			"Writing it.\n[tool call: write_file] {}\n[tool call: terminal] {\"c\":\"x\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := j.Prompt(judge.Turn{Assistant: tt.assistant, NextState: "ok", NextStateRole: "tool"})
			want := []chat.Message{
				{Role: "system", Content: judge.SystemPrompt},
				{Role: "user", Content: "## Assistant response (turn t)\n" + tt.response +
					"\n\n## Next state (turn t+1) [role: tool]\nok\n\n" +
					"Now output your decision and (if positive) the hint in the required format."},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("prompt (-want +got):\n%s", diff)
			}
		})
	}
	for _, s := range []string{`\boxed{1}`, `\boxed{-1}`, judge.HintStart, judge.HintEnd, "role 'tool'", "role 'user'"} {
		require.True(t, strings.Contains(judge.SystemPrompt, s), "system prompt lacks %q", s)
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		s    string
		max  int
		want string
	}{
		{"0123456789ABCDEF", 10, "0123456789\n...[truncated]"},
		{"0123456789", 10, "0123456789"},
		{"ééééééééééé", 10, "éééééééééé\n...[truncated]"},
		{"éééééééééé", 10, "éééééééééé"},
		{"abc", 0, "\n...[truncated]"},
		{"abc", -1, "abc"},
	}
	for _, tt := range tests {
		if got := judge.Truncate(tt.s, tt.max); got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
		}
	}
}

func TestLLMConformance(t *testing.T) {
	judgetest.Run(t, func() judge.Judge {
		j, err := judge.NewLLM(&fakeModel{outputs: []string{pos1, neg, "garbage", pos2}, maxChoices: 2}, judge.LLMConfig{})
		require.NoError(t, err)
		return j
	})
}

func TestFuncConformance(t *testing.T) {
	judgetest.Run(t, func() judge.Judge {
		return judge.Func(func(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
			if err := ctx.Err(); err != nil {
				return judge.Hint{}, err
			}
			if turn.NextStateRole != chat.RoleTool {
				return judge.Hint{Votes: []judge.Vote{{Score: -1}}}, nil
			}
			h := "Read the tool output before the next step."
			return judge.Hint{Text: h, Votes: []judge.Vote{{Score: 1, Hint: h}}}, nil
		})
	})
}

func FuzzTruncate(f *testing.F) {
	f.Add("0123456789ABCDEF", 10)
	f.Add("ééé", 2)
	f.Add("\xff\xfeab", 1)
	f.Fuzz(func(t *testing.T, s string, max int) {
		max %= 64
		got := judge.Truncate(s, max)
		n := len([]rune(s))
		if max < 0 || n <= max {
			if got != s {
				t.Fatalf("Truncate(%q, %d) = %q, want the input", s, max, got)
			}
			return
		}
		prefix, ok := strings.CutSuffix(got, judge.TruncatedSuffix)
		if !ok || !strings.HasPrefix(s, prefix) || len([]rune(prefix)) != max {
			t.Fatalf("Truncate(%q, %d) = %q, want the first %d code points and the suffix", s, max, got, max)
		}
	})
}

// finishModel answers every request with the same choices and finish reasons.
type finishModel judge.ChatResponse

func (m finishModel) Chat(context.Context, judge.ChatRequest) (judge.ChatResponse, error) {
	return judge.ChatResponse(m), nil
}

func TestLLMFinishReasons(t *testing.T) {
	tests := []struct {
		name   string
		finish []string
		want   []string // Unparsed per vote
	}{
		{"stop is read", []string{"stop", "stop", "stop"}, []string{"", "", ""}},
		{"length is never read", []string{"length", "stop", "length"}, []string{judge.UnparsedTruncated, "", judge.UnparsedTruncated}},
		{"other reasons are unfinished", []string{"abort", "tool_calls", "content_filter"}, []string{judge.UnparsedUnfinished, judge.UnparsedUnfinished, judge.UnparsedUnfinished}},
		{"not reported is never read", nil, []string{judge.UnparsedUnknownFinish, judge.UnparsedUnknownFinish, judge.UnparsedUnknownFinish}},
		{"missing entries are unknown", []string{"length"}, []string{judge.UnparsedTruncated, judge.UnparsedUnknownFinish, judge.UnparsedUnknownFinish}},
		{"an empty entry is unknown", []string{"", "length", "stop"}, []string{judge.UnparsedUnknownFinish, judge.UnparsedTruncated, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := finishModel{Choices: []string{pos1, pos1, pos1}, FinishReasons: tt.finish}
			h, err := newLLM(t, m, judge.LLMConfig{}).Judge(context.Background(), turn)
			require.NoError(t, err)
			got := make([]string, len(h.Votes))
			for i, v := range h.Votes {
				got[i] = v.Unparsed
				require.Equal(t, pos1, v.Raw, "the output is kept in Raw")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLLMWarnsOnceWithoutFinishReasons(t *testing.T) {
	tests := []struct {
		name   string
		finish []string
		want   int // warnings
	}{
		{"not reported", nil, 1},
		{"one entry empty", []string{"stop", "", "stop"}, 1},
		{"one entry missing", []string{"stop", "stop"}, 1},
		{"reported", []string{"stop", "stop", "stop"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&buf, nil))
			j := newLLM(t, finishModel{Choices: []string{pos1, pos1, pos1}, FinishReasons: tt.finish}, judge.LLMConfig{Logger: logger})
			for range 2 {
				_, err := j.Judge(context.Background(), turn)
				require.NoError(t, err)
			}
			require.Equal(t, tt.want, strings.Count(buf.String(), "did not say why it ended a choice"), buf.String())
		})
	}
}

package vllm_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm"
)

func TestRender(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /tokenize": {file: "tokenize_chat.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	got, err := c.Render(bg, rollout.RenderRequest{
		Messages:            []chat.Message{{Role: chat.RoleUser, Content: "Hello"}},
		AddGenerationPrompt: true,
	})
	require.NoError(t, err)
	want := rollout.Rendered{Tokens: []int32{151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198}, MaxModelLen: 32768}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	body := r.requests("POST /tokenize")[0].Body
	require.Equal(t, false, body["add_special_tokens"])
	require.Equal(t, true, body["add_generation_prompt"])
	require.Equal(t, false, body["continue_final_message"])
	require.Equal(t, map[string]any{}, body["chat_template_kwargs"], "always explicit")
	_, err = c.Render(bg, rollout.RenderRequest{})
	require.ErrorContains(t, err, "no messages")
}

func TestGenerate(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/completions": {file: "completions_generate.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	prompt := []int32{151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198}
	got, err := c.Generate(bg, rollout.GenerateRequest{Prompt: prompt, MaxTokens: 128, Sampling: sampling.Neutral(1), Seed: new(int64(3))})
	require.NoError(t, err)
	want := rollout.Generation{
		Tokens:       []int32{151657, 515, 151658, 151645},
		Logprobs:     []float32{-0.015625, -0.5, vllm.NegInfLogprob, -0.25},
		Text:         "<tool_call>\n{\"name\": \"run\"}\n</tool_call><|im_end|>",
		FinishReason: rollout.FinishStop,
		PromptTokens: prompt,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	body := r.requests("POST /v1/completions")[0].Body
	wantBody := map[string]any{
		"model": "m", "prompt": toAny(prompt), "n": 1.0, "max_tokens": 128.0,
		"temperature": 1.0, "top_p": 1.0, "top_k": -1.0, "min_p": 0.0, "repetition_penalty": 1.0,
		"presence_penalty": 0.0, "frequency_penalty": 0.0, "seed": 3.0, "logprobs": 0.0,
		"return_token_ids": true, "return_tokens_as_token_ids": true,
		"skip_special_tokens": false, "spaces_between_special_tokens": false,
	}
	if d := cmp.Diff(wantBody, body); d != "" {
		t.Errorf("request (-want +got):\n%s", d)
	}
}

func toAny(ids []int32) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = float64(id)
	}
	return out
}

func TestGenerateFromTokenIDStrings(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/completions": {file: "completions_token_id_strings.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	got, err := c.Generate(bg, rollout.GenerateRequest{Prompt: []int32{1, 2, 3, 4, 5}, MaxTokens: 8})
	require.NoError(t, err)
	require.Equal(t, []int32{13048, 1052, 151645}, got.Tokens)
	require.Equal(t, []float32{-0.125, -1, -0.03125}, got.Logprobs)
	require.Nil(t, got.PromptTokens)
}

func TestGenerateRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  rollout.GenerateRequest
		body string
		want string
	}{
		{"max tokens", rollout.GenerateRequest{Prompt: []int32{1}}, "", "MaxTokens is 0"},
		{"top p", rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1, Sampling: sampling.Params{Temperature: 1, TopP: 2}}, "", "TopP is 2"},
		{"top k", rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1, Sampling: sampling.Params{Temperature: 1, TopK: -3}}, "", "TopK is -3"},
		{"no ids", rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1},
			`{"choices":[{"index":0,"text":"hi","finish_reason":"stop","logprobs":{"tokens":["hi"],"token_logprobs":[-1]}}]}`, "neither token_ids nor token_id:N"},
		{"prompt echo differs", rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1},
			`{"choices":[{"index":0,"finish_reason":"stop","prompt_token_ids":[2],"token_ids":[5],"logprobs":{"tokens":["token_id:5"],"token_logprobs":[-1]}}]}`, "differ from the 1 sent"},
		{"logprobs missing", rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1},
			`{"choices":[{"index":0,"finish_reason":"stop","token_ids":[5]}]}`, "1 generated tokens but -1 logprobs"},
		{"ids disagree", rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1},
			`{"choices":[{"index":0,"finish_reason":"stop","token_ids":[5],"logprobs":{"tokens":["token_id:6"],"token_logprobs":[-1]}}]}`, "disagree"},
		{"null logprob", rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1},
			`{"choices":[{"index":0,"finish_reason":"stop","token_ids":[5],"logprobs":{"tokens":["token_id:5"],"token_logprobs":[null]}}]}`, "null logprob"},
		{"finish reason", rollout.GenerateRequest{Prompt: []int32{1}, MaxTokens: 1},
			`{"choices":[{"index":0,"finish_reason":"abort","token_ids":[5],"logprobs":{"tokens":["token_id:5"],"token_logprobs":[-1]}}]}`, `finish_reason "abort"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplay(t, map[string]route{"POST /v1/completions": {body: tc.body}})
			c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
			_, err := c.Generate(bg, tc.req)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestChat(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/chat/completions": {file: "chat_completion.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	var cm judge.ChatModel = c
	got, err := cm.Chat(bg, judge.ChatRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "judge"}}, N: 2, Sampling: sampling.Neutral(0.6), MaxTokens: 256})
	require.NoError(t, err)
	require.Equal(t, judge.ChatResponse{Choices: []string{`The turn was fine. \boxed{-1}`, ""}, Reasoning: []string{"", ""},
		FinishReasons: []string{"stop", "tool_calls"}}, got)
	body := r.requests("POST /v1/chat/completions")[0].Body
	require.Equal(t, 2.0, body["n"])
	require.Equal(t, 256.0, body["max_tokens"])
	for k, v := range map[string]any{
		"temperature": 0.6, "top_p": 1.0, "top_k": -1.0, "min_p": 0.0, "repetition_penalty": 1.0,
		"presence_penalty": 0.0, "frequency_penalty": 0.0,
	} {
		require.Equal(t, v, body[k], k)
	}
	require.Equal(t, map[string]any{}, body["chat_template_kwargs"], "always explicit")

	_, err = cm.Chat(bg, judge.ChatRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "judge"}}, N: 1})
	require.ErrorContains(t, err, "MaxTokens is 0", "max_tokens is never left to the server")
}

func TestChatReasoning(t *testing.T) {
	// The newest vLLM names the field "reasoning", older ones "reasoning_content".
	const body = `{"choices":[
		{"index":0,"message":{"role":"assistant","content":null,"reasoning":"thinking \\boxed{1}"},"finish_reason":"length"},
		{"index":1,"message":{"role":"assistant","content":null,"reasoning_content":"old name"},"finish_reason":"length"},
		{"index":2,"message":{"role":"assistant","content":"\\boxed{-1}","reasoning":null,"reasoning_content":null},"finish_reason":"stop"}]}`
	r := newReplay(t, map[string]route{"POST /v1/chat/completions": {body: body}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	got, err := c.Chat(bg, judge.ChatRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "judge"}}, N: 3, Sampling: sampling.Neutral(0.7), MaxTokens: 8})
	require.NoError(t, err)
	want := judge.ChatResponse{Choices: []string{"", "", `\boxed{-1}`}, Reasoning: []string{`thinking \boxed{1}`, "old name", ""},
		FinishReasons: []string{"length", "length", "stop"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	resp, err := c.ChatCompletions(bg, vllm.ChatCompletionRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}, N: 3})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, false}, []bool{resp.Choices[0].ContentNull, resp.Choices[1].ContentNull, resp.Choices[2].ContentNull})
}

// A server that sends finish_reason null, or none, leaves the reason unknown: "", in
// its place, for the judge to refuse.
func TestChatUnknownFinishReason(t *testing.T) {
	const body = `{"choices":[
		{"index":0,"message":{"role":"assistant","content":"\\boxed{1}"},"finish_reason":null},
		{"index":1,"message":{"role":"assistant","content":"\\boxed{-1}"}},
		{"index":2,"message":{"role":"assistant","content":"\\boxed{-1}"},"finish_reason":"stop"}]}`
	r := newReplay(t, map[string]route{"POST /v1/chat/completions": {body: body}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	got, err := c.Chat(bg, judge.ChatRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "judge"}}, N: 3, Sampling: sampling.Neutral(0.7), MaxTokens: 8})
	require.NoError(t, err)
	require.Equal(t, []string{"", "", "stop"}, got.FinishReasons)
	require.Equal(t, []string{`\boxed{1}`, `\boxed{-1}`, `\boxed{-1}`}, got.Choices)
}

// teacher is a fake /v1/completions for scoring: at position j ≥ 1 of a prompt it
// ranks ids 1000+j+r (r = 1…vocab) with logprob -r/2, sends them in reverse rank order,
// and puts the actual prompt token first with rank 999 when it is not among the
// top-k, as vLLM's V1 engine does.
type teacher struct {
	mu       sync.Mutex
	requests []map[string]any
	maxLP    int
}

func (f *teacher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var req struct {
		Prompt         json.RawMessage `json:"prompt"`
		PromptLogprobs int             `json:"prompt_logprobs"`
		N              int             `json:"n"`
	}
	var asMap map[string]any
	_ = json.Unmarshal(raw, &asMap)
	f.mu.Lock()
	f.requests = append(f.requests, asMap)
	f.mu.Unlock()
	if err := json.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	if f.maxLP > 0 && req.PromptLogprobs > f.maxLP {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"message":"Requested prompt logprobs of %d, which is greater than max allowed: %d","type":"BadRequestError","param":null,"code":400}}`, req.PromptLogprobs, f.maxLP)
		return
	}
	var prompts [][]int32
	if json.Unmarshal(req.Prompt, &prompts) != nil {
		var one []int32
		if err := json.Unmarshal(req.Prompt, &one); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		prompts = [][]int32{one}
	}
	k := req.PromptLogprobs
	var b strings.Builder
	b.WriteString(`{"id":"cmpl-t","object":"text_completion","model":"m","choices":[`)
	for p, toks := range prompts {
		if p > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"index":%d,"text":"x","finish_reason":"length","prompt_logprobs":[null`, p)
		for j := 1; j < len(toks); j++ {
			b.WriteString(",{")
			actual := toks[j]
			actualRank := 0
			for r := 1; r <= k; r++ {
				if int32(1000+j+r) == actual {
					actualRank = r
				}
			}
			first := true
			if actualRank == 0 {
				fmt.Fprintf(&b, `"%d":{"logprob":-9999.0,"rank":999,"decoded_token":"?"}`, actual)
				first = false
			}
			for r := k; r >= 1; r-- {
				if !first {
					b.WriteString(",")
				}
				first = false
				fmt.Fprintf(&b, `"%d":{"logprob":%g,"rank":%d,"decoded_token":null}`, 1000+j+r, -float64(r)/2, r)
			}
			b.WriteString("}")
		}
		b.WriteString(`],"token_ids":[0]}`)
	}
	b.WriteString(`],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	_, _ = io.WriteString(w, b.String())
}

func newTeacher(t *testing.T) (*teacher, *httptest.Server) {
	f := &teacher{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func TestScore(t *testing.T) {
	f, srv := newTeacher(t)
	c := newTestClient(t, srv.URL, vllm.WithModel("m"))
	var s scorer.LogprobScorer = c
	req := scorer.Request{K: 3, Sequences: []scorer.Sequence{
		{Tokens: []int32{7, 1003, 8, 9}, Positions: []int{1, 3}}, // 1003 is rank 2 at position 1
		{Tokens: []int32{5, 6}, Positions: []int{1}},
		{Tokens: []int32{5, 6}},
	}}
	got, err := s.Score(bg, req)
	require.NoError(t, err)
	want := scorer.Result{Sequences: []scorer.SequenceResult{
		{
			Positions:     []int{1, 3},
			Offsets:       []int32{0, 3, 6},
			TopIDs:        []int32{1002, 1003, 1004, 1004, 1005, 1006},
			TopLogprobs:   []float32{-0.5, -1, -1.5, -0.5, -1, -1.5},
			TokenLogprobs: []float32{-1, vllm.NegInfLogprob},
		},
		{Positions: []int{1}, Offsets: []int32{0, 3}, TopIDs: []int32{1002, 1003, 1004}, TopLogprobs: []float32{-0.5, -1, -1.5}, TokenLogprobs: []float32{vllm.NegInfLogprob}},
		{Positions: []int{}, Offsets: []int32{0}, TopIDs: []int32{}, TopLogprobs: []float32{}, TokenLogprobs: []float32{}},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	require.Len(t, f.requests, 1, "one request for all sequences that need scoring")
	body := f.requests[0]
	require.Equal(t, []any{toAny(req.Sequences[0].Tokens), toAny(req.Sequences[1].Tokens)}, body["prompt"])
	require.Equal(t, 3.0, body["prompt_logprobs"])
	require.Equal(t, 1.0, body["max_tokens"])
	require.Equal(t, 1.0, body["n"])
	require.Equal(t, 1.0, body["temperature"])
}

func TestScoreSplitsBatches(t *testing.T) {
	seq := func(n int) scorer.Sequence {
		toks := make([]int32, n)
		return scorer.Sequence{Tokens: toks, Positions: []int{n - 1}}
	}
	for _, tc := range []struct {
		name        string
		seqs        []scorer.Sequence
		maxSeqs     int
		maxTokens   int
		wantBatches [][]int // prompt lengths per request, in any order
	}{
		{"by count", []scorer.Sequence{seq(2), seq(3), seq(4), seq(5), seq(6)}, 2, 1000, [][]int{{2, 3}, {4, 5}, {6}}},
		{"by tokens", []scorer.Sequence{seq(4), seq(4), seq(4), seq(9)}, 10, 8, [][]int{{4, 4}, {4}, {9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newTeacher(t)
			c := newTestClient(t, srv.URL, vllm.WithModel("m"), vllm.WithScoreBatch(tc.maxSeqs, tc.maxTokens, 2))
			got, err := c.Score(bg, scorer.Request{K: 2, Sequences: tc.seqs})
			require.NoError(t, err)
			require.Len(t, got.Sequences, len(tc.seqs))
			var batches [][]int
			for _, r := range f.requests {
				var lens []int
				prompt := r["prompt"].([]any)
				if _, flat := prompt[0].(float64); flat {
					lens = []int{len(prompt)}
				} else {
					for _, p := range prompt {
						lens = append(lens, len(p.([]any)))
					}
				}
				batches = append(batches, lens)
			}
			require.ElementsMatch(t, tc.wantBatches, batches)
		})
	}
}

func TestScoreErrors(t *testing.T) {
	f, srv := newTeacher(t)
	f.maxLP = 20
	c := newTestClient(t, srv.URL, vllm.WithModel("m"))

	_, err := c.Score(bg, scorer.Request{K: 0, Sequences: []scorer.Sequence{{Tokens: []int32{1, 2}, Positions: []int{1}}}})
	require.ErrorIs(t, err, scorer.ErrInvalidRequest)
	_, err = c.Score(bg, scorer.Request{K: 2, Sequences: []scorer.Sequence{{Tokens: []int32{1, 2}, Positions: []int{0}}}})
	require.ErrorIs(t, err, scorer.ErrInvalidRequest)
	require.Empty(t, f.requests, "invalid requests never reach the server")

	_, err = c.Score(bg, scorer.Request{K: 50, Sequences: []scorer.Sequence{{Tokens: []int32{1, 2}, Positions: []int{1}}}})
	require.ErrorIs(t, err, vllm.ErrMaxLogprobs)
	var ml *vllm.MaxLogprobsError
	require.ErrorAs(t, err, &ml)
	require.Equal(t, 20, ml.Max)
	require.Contains(t, err.Error(), "--max-logprobs 50")
}

func TestScoreShortPromptLogprobsNamesTheKVConnector(t *testing.T) {
	// A KV connector that loaded a cached prefix skips its rows.
	r := newReplay(t, map[string]route{"POST /v1/completions": {body: `{"choices":[{"index":0,"prompt_logprobs":[null,{"3":{"logprob":-1,"rank":1}}]}]}`}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	_, err := c.Score(bg, scorer.Request{K: 1, Sequences: []scorer.Sequence{{Tokens: []int32{1, 2, 3}, Positions: []int{2}}}})
	require.ErrorIs(t, err, vllm.ErrShortPromptLogprobs)
	require.ErrorContains(t, err, "2 positions for a 3-token prompt")
	require.ErrorContains(t, err, "KV connector")
	require.ErrorContains(t, err, "--kv-transfer-config", "the error says how to fix it")
}

func TestScoreRejectsMisalignedReplies(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"too long", `{"choices":[{"index":0,"prompt_logprobs":[null,{"2":{"logprob":-1,"rank":1}},null]}]}`, "3 positions, the prompt 2 tokens"},
		{"actual token absent", `{"choices":[{"index":0,"prompt_logprobs":[null,{"9":{"logprob":-1,"rank":1}}]}]}`, "no entry for the prompt token 2"},
		{"no prompt_logprobs", `{"choices":[{"index":0}]}`, "0 positions"},
		{"no ranked entries", `{"choices":[{"index":0,"prompt_logprobs":[null,{"2":{"logprob":-1,"rank":40}}]}]}`, "no ranked entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplay(t, map[string]route{"POST /v1/completions": {body: tc.body}})
			c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
			_, err := c.Score(bg, scorer.Request{K: 2, Sequences: []scorer.Sequence{{Tokens: []int32{1, 2}, Positions: []int{1}}}})
			require.ErrorContains(t, err, tc.want)
		})
	}
}

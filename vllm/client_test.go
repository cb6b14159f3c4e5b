package vllm_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/vllm"
)

func TestNewClientRejectsBadBaseURL(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"empty", ""},
		{"no scheme", "localhost:8000"},
		{"ftp", "ftp://host"},
		{"no host", "http://"},
		{"unparsable", "http://[::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vllm.NewClient(tc.url)
			require.Error(t, err)
		})
	}
}

func TestNewClientRejectsBadScoreLimits(t *testing.T) {
	_, err := vllm.NewClient("http://localhost:8000", vllm.WithScoreBatch(0, 10, 1))
	require.ErrorContains(t, err, "score batch limits")
}

func TestBaseURLDropsV1(t *testing.T) {
	c, err := vllm.NewClient("http://localhost:8000/v1/")
	require.NoError(t, err)
	require.Equal(t, "http://localhost:8000", c.BaseURL())
}

func TestModelsVersionHealth(t *testing.T) {
	r := newReplay(t, map[string]route{
		"GET /v1/models": {file: "models.json"},
		"GET /version":   {file: "version.json"},
		"GET /health":    {},
	})
	c := newTestClient(t, r.srv.URL+"/v1", vllm.WithAPIKey("sk-test"))

	models, err := c.Models(bg)
	require.NoError(t, err)
	want := []vllm.Model{{ID: "Qwen/Qwen3-8B", Object: "model", Created: 1730000000, OwnedBy: "vllm", Root: "/models/Qwen3-8B", MaxModelLen: 32768}}
	if d := cmp.Diff(want, models); d != "" {
		t.Errorf("Models (-want +got):\n%s", d)
	}
	v, err := c.Version(bg)
	require.NoError(t, err)
	require.Equal(t, "0.10.1.1", v)
	require.NoError(t, c.Health(bg))
	for _, s := range r.reqs {
		require.Equal(t, "Bearer sk-test", s.Header.Get("Authorization"), s.Path)
	}
}

func TestHealthFailsWithoutRetry(t *testing.T) {
	r := newReplay(t, map[string]route{"GET /health": {status: http.StatusServiceUnavailable}})
	c := newTestClient(t, r.srv.URL)
	err := c.Health(bg)
	var ae *vllm.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusServiceUnavailable, ae.Status)
	require.Len(t, r.requests("GET /health"), 1)
	require.ErrorContains(t, err, "vllm: GET /health: 503")
}

func TestModelResolvedOnceAndSent(t *testing.T) {
	r := newReplay(t, map[string]route{
		"GET /v1/models":   {file: "models.json"},
		"POST /detokenize": {file: "detokenize.json"},
	})
	c := newTestClient(t, r.srv.URL)
	for range 3 {
		text, err := c.Detokenize(bg, []int32{151644, 872, 198, 9707, 151645, 198})
		require.NoError(t, err)
		require.Equal(t, "<|im_start|>user\nHello<|im_end|>\n", text)
	}
	require.Len(t, r.requests("GET /v1/models"), 1)
	for _, s := range r.requests("POST /detokenize") {
		require.Equal(t, "Qwen/Qwen3-8B", s.Body["model"])
		require.Equal(t, []any{151644.0, 872.0, 198.0, 9707.0, 151645.0, 198.0}, s.Body["tokens"])
	}
}

func TestWithModelSkipsModelsCall(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /detokenize": {file: "detokenize.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("served"))
	_, err := c.Detokenize(bg, []int32{1})
	require.NoError(t, err)
	require.Empty(t, r.requests("GET /v1/models"))
	require.Equal(t, "served", r.requests("POST /detokenize")[0].Body["model"])
}

func TestModelEmptyListIsAnError(t *testing.T) {
	r := newReplay(t, map[string]route{"GET /v1/models": {body: `{"object":"list","data":[]}`}})
	c := newTestClient(t, r.srv.URL)
	_, err := c.Model(bg)
	require.ErrorContains(t, err, "lists no model")
}

func TestTokenizeChatForm(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /tokenize": {file: "tokenize_chat.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	tools := []chat.Tool{{Type: "function", Function: chat.ToolFunction{Name: "run", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	resp, err := c.Tokenize(bg, vllm.TokenizeRequest{
		Messages:            []chat.Message{{Role: chat.RoleUser, Content: "Hello"}},
		Tools:               tools,
		AddGenerationPrompt: new(true),
		ChatTemplateKwargs:  map[string]any{"enable_thinking": false},
		AddSpecialTokens:    new(false),
	})
	require.NoError(t, err)
	want := &vllm.TokenizeResponse{Count: 9, MaxModelLen: 32768, Tokens: []int32{151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198}}
	if d := cmp.Diff(want, resp); d != "" {
		t.Errorf("Tokenize (-want +got):\n%s", d)
	}
	body := r.requests("POST /tokenize")[0].Body
	wantBody := map[string]any{
		"model":                 "m",
		"messages":              []any{map[string]any{"role": "user", "content": "Hello"}},
		"tools":                 []any{map[string]any{"type": "function", "function": map[string]any{"name": "run", "parameters": map[string]any{"type": "object"}}}},
		"add_generation_prompt": true,
		"chat_template_kwargs":  map[string]any{"enable_thinking": false},
		"add_special_tokens":    false,
	}
	if d := cmp.Diff(wantBody, body); d != "" {
		t.Errorf("request body (-want +got):\n%s", d)
	}
}

func TestTokenizePromptForm(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /tokenize": {body: `{"count":2,"max_model_len":4096,"tokens":[1,2],"token_strs":["a","b"]}`}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	resp, err := c.Tokenize(bg, vllm.TokenizeRequest{Prompt: new("ab"), AddSpecialTokens: new(false), ReturnTokenStrs: true})
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2}, resp.Tokens)
	require.Equal(t, map[string]any{"model": "m", "prompt": "ab", "add_special_tokens": false, "return_token_strs": true}, r.requests("POST /tokenize")[0].Body)
}

func TestTokenizeBadRequests(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /tokenize": {body: `{"count":3,"max_model_len":4096,"tokens":[1,2]}`}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "x"}}
	for _, tc := range []struct {
		name string
		req  vllm.TokenizeRequest
		want string
	}{
		{"neither form", vllm.TokenizeRequest{}, "exactly one of Prompt and Messages"},
		{"both forms", vllm.TokenizeRequest{Prompt: new("x"), Messages: msgs}, "exactly one of Prompt and Messages"},
		{"empty messages", vllm.TokenizeRequest{Messages: []chat.Message{}}, "Messages is empty"},
		{"both forms, messages empty", vllm.TokenizeRequest{Prompt: new("x"), Messages: []chat.Message{}}, "exactly one of Prompt and Messages"},
		{"chat fields on prompt", vllm.TokenizeRequest{Prompt: new("x"), AddGenerationPrompt: new(true)}, "need Messages"},
		{"both template switches", vllm.TokenizeRequest{Messages: msgs, AddGenerationPrompt: new(true), ContinueFinalMessage: new(true)}, "cannot both be true"},
		{"count disagrees", vllm.TokenizeRequest{Messages: msgs}, "count 3 but 2 tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Tokenize(bg, tc.req)
			require.ErrorContains(t, err, tc.want)
		})
	}
	require.Len(t, r.requests("POST /tokenize"), 1, "only the well-formed request reaches the server")
}

func TestTokenizeContinueFinalMessageTurnsOffGenerationPrompt(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /tokenize": {file: "tokenize_chat.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	_, err := c.Tokenize(bg, vllm.TokenizeRequest{
		Messages:             []chat.Message{{Role: chat.RoleAssistant, Content: "par"}},
		ContinueFinalMessage: new(true),
	})
	require.NoError(t, err)
	body := r.requests("POST /tokenize")[0].Body
	require.Equal(t, false, body["add_generation_prompt"])
	require.Equal(t, true, body["continue_final_message"])
}

func TestCompletionsRequestBody(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/completions": {file: "completions_batched.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	_, err := c.Completions(bg, vllm.CompletionRequest{
		Prompts:                    [][]int32{{151644, 872, 198, 9707}, {151644, 100}},
		N:                          2,
		MaxTokens:                  1,
		Temperature:                new(0.0),
		TopP:                       new(1.0),
		Seed:                       new(int64(7)),
		Stop:                       []string{"</s>"},
		Logprobs:                   new(0),
		PromptLogprobs:             new(2),
		ReturnTokenIDs:             true,
		ReturnTokensAsTokenIDs:     true,
		SkipSpecialTokens:          new(false),
		SpacesBetweenSpecialTokens: new(false),
		Extra:                      map[string]any{"top_k": -1, "include_stop_str_in_output": true},
	})
	require.NoError(t, err)
	want := map[string]any{
		"model":                         "m",
		"prompt":                        []any{[]any{151644.0, 872.0, 198.0, 9707.0}, []any{151644.0, 100.0}},
		"n":                             2.0,
		"max_tokens":                    1.0,
		"temperature":                   0.0,
		"top_p":                         1.0,
		"seed":                          7.0,
		"stop":                          []any{"</s>"},
		"logprobs":                      0.0,
		"prompt_logprobs":               2.0,
		"return_token_ids":              true,
		"return_tokens_as_token_ids":    true,
		"skip_special_tokens":           false,
		"spaces_between_special_tokens": false,
		"top_k":                         -1.0,
		"include_stop_str_in_output":    true,
	}
	if d := cmp.Diff(want, r.requests("POST /v1/completions")[0].Body); d != "" {
		t.Errorf("request body (-want +got):\n%s", d)
	}
}

func TestCompletionsSinglePromptIsFlat(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/completions": {file: "completions_token_id_strings.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	_, err := c.Completions(bg, vllm.CompletionRequest{Prompts: [][]int32{{1, 2, 3}}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"model": "m", "prompt": []any{1.0, 2.0, 3.0}}, r.requests("POST /v1/completions")[0].Body)
}

func TestCompletionsBadRequests(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/completions": {file: "completions_batched.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	for _, tc := range []struct {
		name string
		req  vllm.CompletionRequest
		want string
	}{
		{"no prompt", vllm.CompletionRequest{}, "no prompt"},
		{"empty prompt", vllm.CompletionRequest{Prompts: [][]int32{{1}, {}}}, "prompt 1 is empty"},
		{"negative n", vllm.CompletionRequest{Prompts: [][]int32{{1}}, N: -1}, "negative N"},
		{"extra collides", vllm.CompletionRequest{Prompts: [][]int32{{1}}, Extra: map[string]any{"model": "x"}}, `Extra key "model"`},
		{"extra sets the prompt", vllm.CompletionRequest{Prompts: [][]int32{{1}}, Extra: map[string]any{"prompt": "x"}}, `Extra key "prompt"`},
		{"extra unencodable", vllm.CompletionRequest{Prompts: [][]int32{{1}}, Extra: map[string]any{"f": func() {}}}, `Extra key "f"`},
		{"choice count", vllm.CompletionRequest{Prompts: [][]int32{{1}}}, "4 choices for 1 prompts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Completions(bg, tc.req)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "vllm: POST /v1/completions: ")
		})
	}
}

func TestChatCompletions(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/chat/completions": {file: "chat_completion.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "fix it"},
		{Role: chat.RoleAssistant, ToolCalls: []chat.ToolCall{{ID: "call_1", Type: "function", Function: chat.FunctionCall{Name: "run_tests", Arguments: `{"path":"t.py"}`}}}},
		{Role: chat.RoleTool, ToolCallID: "call_1", Content: "1 failed"},
	}
	resp, err := c.ChatCompletions(bg, vllm.ChatCompletionRequest{Messages: msgs, N: 2, Temperature: new(0.7), MaxTokens: 64, Extra: map[string]any{"top_k": 20}})
	require.NoError(t, err)
	require.Len(t, resp.Choices, 2)
	require.Equal(t, `The turn was fine. \boxed{-1}`, resp.Choices[0].Message.Content)
	wantCall := []chat.ToolCall{{ID: "chatcmpl-tool-8f9e", Type: "function", Function: chat.FunctionCall{Name: "run_tests", Arguments: `{"path": "test_sol.py"}`}}}
	if d := cmp.Diff(wantCall, resp.Choices[1].Message.ToolCalls); d != "" {
		t.Errorf("tool calls (-want +got):\n%s", d)
	}
	require.Equal(t, "", resp.Choices[1].Message.Content)
	require.Equal(t, "tool_calls", resp.Choices[1].FinishReason)

	body := r.requests("POST /v1/chat/completions")[0].Body
	require.Equal(t, 2.0, body["n"])
	require.Equal(t, 20.0, body["top_k"])
	sent, _ := json.Marshal(body["messages"])
	var got []chat.Message
	require.NoError(t, json.Unmarshal(sent, &got))
	if d := cmp.Diff(msgs, got); d != "" {
		t.Errorf("messages sent (-want +got):\n%s", d)
	}
}

func TestChatCompletionsNoMessages(t *testing.T) {
	c := newTestClient(t, "http://127.0.0.1:1", vllm.WithModel("m"))
	_, err := c.ChatCompletions(bg, vllm.ChatCompletionRequest{})
	require.ErrorContains(t, err, "no messages")
}

func TestMalformedSuccessBody(t *testing.T) {
	r := newReplay(t, map[string]route{
		"GET /version":         {body: `{"version":`},
		"POST /v1/completions": {body: `{"choices":[{"index":0,"prompt_logprobs":[null,{"x":{}}]}]}`},
	})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	_, err := c.Version(bg)
	require.ErrorContains(t, err, "vllm: GET /version: decode response")
	_, err = c.Completions(bg, vllm.CompletionRequest{Prompts: [][]int32{{1, 2}}})
	require.ErrorContains(t, err, "vllm: POST /v1/completions: decode response")
	var ae *vllm.APIError
	require.False(t, errors.As(err, &ae))
}

func TestChatCompletionsPromptLogprobsAndTokenIDs(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/chat/completions": {file: "chat_completion_prompt_logprobs.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	resp, err := c.ChatCompletions(bg, vllm.ChatCompletionRequest{
		Messages:       []chat.Message{{Role: chat.RoleUser, Content: "judge this"}},
		PromptLogprobs: new(2),
		ReturnTokenIDs: true,
	})
	require.NoError(t, err)
	body := r.requests("POST /v1/chat/completions")[0].Body
	require.Equal(t, 2.0, body["prompt_logprobs"])
	require.Equal(t, true, body["return_token_ids"])

	require.Equal(t, []int32{151644, 872, 198, 151645}, resp.PromptTokenIDs)
	require.Len(t, resp.Choices, 1)
	require.Equal(t, []int32{47, 3836, 151643}, resp.Choices[0].TokenIDs)
	require.Equal(t, 151643.0, resp.Choices[0].StopReason)
	require.Equal(t, vllm.Usage{PromptTokens: 4, CompletionTokens: 3, TotalTokens: 7}, resp.Usage)

	want := &vllm.PromptLogprobs{
		Offsets:  []int32{0, 0, 3, 5, 8},
		IDs:      []int32{872, 8948, 77091, 198, 271, 151645, 9707, 13048},
		Logprobs: []float32{-3.25, -0.5, -1.5, -0.015625, -4.5, vllm.NegInfLogprob, -0.25, -2},
		Ranks:    []int32{4, 1, 2, 1, 2, 151936, 1, 2},
	}
	if d := cmp.Diff(want, resp.PromptLogprobs, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("prompt_logprobs (-want +got):\n%s", d)
	}
	ids, lps, err := resp.PromptLogprobs.AppendTopK(3, 2, nil, nil)
	require.NoError(t, err)
	require.Equal(t, []int32{9707, 13048}, ids)
	require.Equal(t, []float32{-0.25, -2}, lps)
	lp, rank, ok := resp.PromptLogprobs.Lookup(3, 151645)
	require.True(t, ok)
	require.True(t, vllm.IsNegInf(lp))
	require.Equal(t, int32(151936), rank)

	// Without them, both stay nil and nothing is sent.
	r2 := newReplay(t, map[string]route{"POST /v1/chat/completions": {file: "chat_completion.json"}})
	c2 := newTestClient(t, r2.srv.URL, vllm.WithModel("m"))
	resp, err = c2.ChatCompletions(bg, vllm.ChatCompletionRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "q"}}})
	require.NoError(t, err)
	require.Nil(t, resp.PromptLogprobs)
	require.Nil(t, resp.PromptTokenIDs)
	require.NotContains(t, r2.requests("POST /v1/chat/completions")[0].Body, "prompt_logprobs")
	require.NotContains(t, r2.requests("POST /v1/chat/completions")[0].Body, "return_token_ids")
}

func TestDecodeChatCompletionResponseRejects(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"index out of order", `{"choices":[{"index":1,"message":{"role":"assistant","content":"x"}}]}`, "choices[0] has index 1"},
		{"bad prompt_logprobs key", `{"choices":[],"prompt_logprobs":[null,{"x":{"logprob":-1}}]}`, "not a token id"},
		{"prompt_logprobs without logprob", `{"choices":[],"prompt_logprobs":[null,{"5":{"rank":1}}]}`, "no logprob"},
		{"trailing data", `{"choices":[]} {}`, "after the top-level value"},
		{"not an object", `[]`, "want '{'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vllm.DecodeChatCompletionResponse([]byte(tc.body))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestChatCompletionsPromptLengthsDisagree(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/chat/completions": {body: `{"choices":[],"prompt_logprobs":[null,null],"prompt_token_ids":[1,2,3]}`}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	_, err := c.ChatCompletions(bg, vllm.ChatCompletionRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "q"}}})
	require.ErrorContains(t, err, "prompt_logprobs has 2 positions, prompt_token_ids 3")
}

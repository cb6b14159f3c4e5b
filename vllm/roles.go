package vllm

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/scorer"
)

// The roles a Client and a Pool play.
var (
	_ rollout.Policy       = (*Client)(nil)
	_ scorer.LogprobScorer = (*Client)(nil)
	_ judge.ChatModel      = (*Client)(nil)
	_ rollout.Policy       = (*Pool)(nil)
	_ scorer.LogprobScorer = (*Pool)(nil)
	_ judge.ChatModel      = (*Pool)(nil)
)

// Render implements [rollout.Policy] with POST /tokenize in chat form:
// add_special_tokens false (the template carries any BOS), chat_template_kwargs always
// sent (an empty object when none), continue_final_message false.
func (c *Client) Render(ctx context.Context, req rollout.RenderRequest) (rollout.Rendered, error) {
	if len(req.Messages) == 0 {
		return rollout.Rendered{}, fmt.Errorf("vllm: POST /tokenize: no messages to render")
	}
	kw := req.ChatTemplateKwargs
	if kw == nil {
		kw = map[string]any{}
	}
	resp, err := c.Tokenize(ctx, TokenizeRequest{
		Messages:             req.Messages,
		Tools:                req.Tools,
		AddGenerationPrompt:  new(req.AddGenerationPrompt),
		ContinueFinalMessage: new(false),
		ChatTemplateKwargs:   kw,
		AddSpecialTokens:     new(false),
	})
	if err != nil {
		return rollout.Rendered{}, err
	}
	return rollout.Rendered{Tokens: resp.Tokens, MaxModelLen: resp.MaxModelLen}, nil
}

// Generate implements [rollout.Policy] with POST /v1/completions: the token-id prompt,
// n 1, max_tokens, every sampling field of req.Sampling (temperature, top_p, top_k,
// min_p and the three penalties, resolved so that "off" is stated, never left to the
// server), return_token_ids, logprobs 0 (the sampled token's logprob) with
// return_tokens_as_token_ids, skip_special_tokens and spaces_between_special_tokens
// false, no stop strings (generation ends on the model's stop ids only).
//
// Token ids come from token_ids, or from the "token_id:N" strings on servers older
// than 0.10.2; a reply that carries neither is an error. When the server echoes the
// prompt ids, they must equal the prompt sent.
func (c *Client) Generate(ctx context.Context, req rollout.GenerateRequest) (rollout.Generation, error) {
	const path = "/v1/completions"
	if req.MaxTokens < 1 {
		return rollout.Generation{}, fmt.Errorf("vllm: POST %s: MaxTokens is %d, want ≥ 1", path, req.MaxTokens)
	}
	if err := checkSampling(path, req.Sampling); err != nil {
		return rollout.Generation{}, err
	}
	creq := CompletionRequest{
		Prompts:                    [][]int32{req.Prompt},
		N:                          1,
		MaxTokens:                  req.MaxTokens,
		Seed:                       req.Seed,
		Logprobs:                   new(0),
		ReturnTokenIDs:             true,
		ReturnTokensAsTokenIDs:     true,
		SkipSpecialTokens:          new(false),
		SpacesBetweenSpecialTokens: new(false),
	}
	creq.SetSampling(req.Sampling)
	resp, err := c.completions(ctx, creq, decodeNoTopLogprobs)
	if err != nil {
		return rollout.Generation{}, err
	}
	return generationOf(&resp.Choices[0], req.Prompt)
}

func generationOf(ch *CompletionChoice, prompt []int32) (rollout.Generation, error) {
	const op = "vllm: POST /v1/completions"
	if ch.TokenIDs == nil {
		return rollout.Generation{}, fmt.Errorf("%s: the reply has neither token_ids nor token_id:N strings", op)
	}
	if ch.PromptTokenIDs != nil && !equalIDs(ch.PromptTokenIDs, prompt) {
		return rollout.Generation{}, fmt.Errorf("%s: the server saw %d prompt tokens that differ from the %d sent", op, len(ch.PromptTokenIDs), len(prompt))
	}
	g := rollout.Generation{
		Tokens:       ch.TokenIDs,
		Text:         ch.Text,
		FinishReason: ch.FinishReason,
		PromptTokens: ch.PromptTokenIDs,
	}
	if ch.Logprobs == nil || len(ch.Logprobs.TokenLogprobs) != len(ch.TokenIDs) {
		n := -1
		if ch.Logprobs != nil {
			n = len(ch.Logprobs.TokenLogprobs)
		}
		return rollout.Generation{}, fmt.Errorf("%s: %d generated tokens but %d logprobs", op, len(ch.TokenIDs), n)
	}
	if ch.Logprobs.Tokens != nil {
		if ids, ok := tokenIDsFromStrings(ch.Logprobs.Tokens); ok && !equalIDs(ids, ch.TokenIDs) {
			return rollout.Generation{}, fmt.Errorf("%s: token_ids and the logprobs tokens disagree", op)
		}
	}
	g.Logprobs = make([]float32, len(ch.TokenIDs))
	for i, lp := range ch.Logprobs.TokenLogprobs {
		if lp == nil {
			return rollout.Generation{}, fmt.Errorf("%s: generated token %d has a null logprob", op, i)
		}
		g.Logprobs[i] = *lp
	}
	switch g.FinishReason {
	case rollout.FinishStop, rollout.FinishLength:
	default:
		return rollout.Generation{}, fmt.Errorf("%s: finish_reason %q, want stop or length", op, g.FinishReason)
	}
	return g, nil
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Chat implements [judge.ChatModel] with POST /v1/chat/completions, asking for req.N
// choices in one request, with max_tokens, every sampling field of req.Sampling and
// chat_template_kwargs (an empty object when nil). The reply may hold fewer choices
// than asked for. A choice's reasoning ("reasoning", or "reasoning_content" on older
// servers) goes to Reasoning, never to Choices; its finish_reason to FinishReasons,
// "" where the server sent null or no finish_reason (the LLM judge then reads no vote
// from the choice: [judge.UnparsedUnknownFinish]).
func (c *Client) Chat(ctx context.Context, req judge.ChatRequest) (judge.ChatResponse, error) {
	const path = "/v1/chat/completions"
	if req.MaxTokens < 1 {
		return judge.ChatResponse{}, fmt.Errorf("vllm: POST %s: MaxTokens is %d, want ≥ 1 (a request without max_tokens may fill the context)", path, req.MaxTokens)
	}
	if err := checkSampling(path, req.Sampling); err != nil {
		return judge.ChatResponse{}, err
	}
	kw := req.ChatTemplateKwargs
	if kw == nil {
		kw = map[string]any{}
	}
	creq := ChatCompletionRequest{
		Messages:           req.Messages,
		N:                  max(req.N, 1),
		MaxTokens:          req.MaxTokens,
		ChatTemplateKwargs: kw,
	}
	creq.SetSampling(req.Sampling)
	resp, err := c.ChatCompletions(ctx, creq)
	if err != nil {
		return judge.ChatResponse{}, err
	}
	n := len(resp.Choices)
	out := judge.ChatResponse{Choices: make([]string, n), Reasoning: make([]string, n), FinishReasons: make([]string, n)}
	for i, ch := range resp.Choices {
		out.Choices[i] = ch.Message.Content
		out.Reasoning[i] = ch.Message.ReasoningContent
		out.FinishReasons[i] = ch.FinishReason
	}
	return out, nil
}

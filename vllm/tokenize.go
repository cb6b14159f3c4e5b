package vllm

import (
	"context"
	"fmt"
	"net/http"

	"github.com/agentic-opd/agenticopd/chat"
)

// TokenizeRequest is a POST /tokenize request, in prompt form (Prompt set) or chat form
// (Messages set, not empty); setting both, or neither, is an error.
//
// The boolean switches are pointers because the server's defaults differ between the
// forms (add_special_tokens is true for a prompt, false for messages;
// add_generation_prompt is true); nil sends nothing and leaves the server's default.
type TokenizeRequest struct {
	// Model overrides the client's model.
	Model string `json:"model,omitempty"`

	// Prompt is the text to tokenize (prompt form).
	Prompt *string `json:"prompt,omitempty"`

	// Messages is the conversation to render with the chat template (chat form).
	Messages []chat.Message `json:"messages,omitempty"`
	// Tools are rendered by the template (chat form).
	Tools []chat.Tool `json:"tools,omitempty"`
	// AddGenerationPrompt appends the assistant turn's opening (chat form); nil leaves
	// the server's default (true).
	AddGenerationPrompt *bool `json:"add_generation_prompt,omitempty"`
	// ContinueFinalMessage leaves the last message open; never together with
	// AddGenerationPrompt.
	ContinueFinalMessage *bool `json:"continue_final_message,omitempty"`
	// ChatTemplateKwargs is passed to the template, for example {"enable_thinking": false}.
	// nil sends nothing; an empty map sends {}.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitzero"`

	// AddSpecialTokens adds the tokenizer's special tokens such as BOS; nil leaves the
	// server's default (true for a prompt, false for messages).
	AddSpecialTokens *bool `json:"add_special_tokens,omitempty"`
	// ReturnTokenStrs asks for TokenStrs in the response.
	ReturnTokenStrs bool `json:"return_token_strs,omitempty"`
}

// TokenizeResponse is the answer of POST /tokenize.
type TokenizeResponse struct {
	Count       int     `json:"count"`         // number of tokens, len(Tokens)
	MaxModelLen int     `json:"max_model_len"` // the model's context length in tokens
	Tokens      []int32 `json:"tokens"`        // the token ids
	// TokenStrs is filled only when asked for; never use it to identify tokens.
	TokenStrs []string `json:"token_strs"`
}

// Tokenize calls POST /tokenize.
func (c *Client) Tokenize(ctx context.Context, req TokenizeRequest) (*TokenizeResponse, error) {
	const path = "/tokenize"
	if (req.Prompt == nil) == (req.Messages == nil) {
		return nil, fmt.Errorf("vllm: POST %s: set exactly one of Prompt and Messages", path)
	}
	if req.Messages != nil && len(req.Messages) == 0 {
		// encoding/json would drop the empty list, leaving a request of neither form
		return nil, fmt.Errorf("vllm: POST %s: Messages is empty", path)
	}
	if req.Prompt != nil && (req.Tools != nil || req.AddGenerationPrompt != nil || req.ContinueFinalMessage != nil || req.ChatTemplateKwargs != nil) {
		return nil, fmt.Errorf("vllm: POST %s: Tools, AddGenerationPrompt, ContinueFinalMessage and ChatTemplateKwargs need Messages", path)
	}
	if req.AddGenerationPrompt != nil && *req.AddGenerationPrompt && req.ContinueFinalMessage != nil && *req.ContinueFinalMessage {
		return nil, fmt.Errorf("vllm: POST %s: AddGenerationPrompt and ContinueFinalMessage cannot both be true", path)
	}
	if req.Messages != nil && req.AddGenerationPrompt == nil && req.ContinueFinalMessage != nil && *req.ContinueFinalMessage {
		// The server's default add_generation_prompt is true, which it refuses with
		// continue_final_message; say what is meant.
		req.AddGenerationPrompt = new(false)
	}
	m, err := c.modelFor(ctx, req.Model)
	if err != nil {
		return nil, err
	}
	req.Model = m
	raw, err := c.call(ctx, c.retry, http.MethodPost, path, req)
	if err != nil {
		return nil, err
	}
	out, err := decodeTokenizeResponse(raw)
	if err != nil {
		return nil, fmt.Errorf("vllm: POST %s: decode response: %w", path, err)
	}
	if out.Count != 0 && out.Count != len(out.Tokens) {
		return nil, fmt.Errorf("vllm: POST %s: count %d but %d tokens", path, out.Count, len(out.Tokens))
	}
	return &out, nil
}

// Detokenize calls POST /detokenize and returns the decoded text. The text is for
// display and parsing only; token ids are never derived from it.
func (c *Client) Detokenize(ctx context.Context, tokens []int32) (string, error) {
	const path = "/detokenize"
	m, err := c.Model(ctx)
	if err != nil {
		return "", err
	}
	if tokens == nil {
		tokens = []int32{}
	}
	body := struct {
		Model  string  `json:"model"`
		Tokens []int32 `json:"tokens"`
	}{m, tokens}
	raw, err := c.call(ctx, c.retry, http.MethodPost, path, body)
	if err != nil {
		return "", err
	}
	var out struct {
		Prompt string `json:"prompt"`
	}
	if err := decodeInto(http.MethodPost, path, raw, &out); err != nil {
		return "", err
	}
	return out.Prompt, nil
}

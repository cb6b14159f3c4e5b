package vllm

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/agentic-opd/agenticopd/chat"
)

// ChatCompletionRequest is a POST /v1/chat/completions request.
type ChatCompletionRequest struct {
	// Model overrides the client's model.
	Model string `json:"model"`
	// Messages may carry assistant tool calls and tool results.
	Messages []chat.Message `json:"messages"`
	Tools    []chat.Tool    `json:"tools,omitempty"`
	// N is the number of choices; 0 means 1. A server may return fewer.
	N           int      `json:"n,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	Stop        []string `json:"stop,omitempty"`
	// ChatTemplateKwargs is passed to the template, for example {"enable_thinking": false}.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitzero"`
	// Extra members are merged into the JSON body; a key that a field above already
	// sends is an error.
	Extra map[string]any `json:"-"`
}

// ChatCompletionResponse is the answer of POST /v1/chat/completions.
type ChatCompletionResponse struct {
	ID      string       `json:"id"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   Usage        `json:"usage"`
}

// ChatChoice is one returned message.
type ChatChoice struct {
	Index int `json:"index"`
	// Message holds the text and any parsed tool calls. A null content arrives as "".
	Message chat.Message `json:"message"`
	// FinishReason is "stop", "length" or "tool_calls".
	FinishReason string `json:"finish_reason"`
	// TokenIDs are the generated ids when the server was asked for them.
	TokenIDs []int32 `json:"token_ids"`
}

// ChatCompletions calls POST /v1/chat/completions.
func (c *Client) ChatCompletions(ctx context.Context, req ChatCompletionRequest) (*ChatCompletionResponse, error) {
	const path = "/v1/chat/completions"
	if len(req.Messages) == 0 {
		return nil, errors.New("vllm: POST /v1/chat/completions: no messages")
	}
	if req.N < 0 || req.MaxTokens < 0 {
		return nil, fmt.Errorf("vllm: POST %s: negative N (%d) or MaxTokens (%d)", path, req.N, req.MaxTokens)
	}
	m, err := c.modelFor(ctx, req.Model)
	if err != nil {
		return nil, err
	}
	req.Model = m
	body, err := mergeExtra(req, req.Extra)
	if err != nil {
		return nil, fmt.Errorf("vllm: POST %s: %w", path, err)
	}
	raw, err := c.call(ctx, c.retry, http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	var out ChatCompletionResponse
	if err := decodeInto(http.MethodPost, path, raw, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

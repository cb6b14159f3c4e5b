package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// ChatCompletionRequest is a POST /v1/chat/completions request.
type ChatCompletionRequest struct {
	// Model overrides the client's model.
	Model string `json:"model"`
	// Messages may carry assistant tool calls and tool results.
	Messages []chat.Message `json:"messages"`
	// Tools are the function tools offered to the model; nil offers none.
	Tools []chat.Tool `json:"tools,omitempty"`
	// N is the number of choices; 0 means 1. A server may return fewer.
	N int `json:"n,omitempty"`
	// MaxTokens bounds each choice's generated tokens; 0 leaves the server's default.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Temperature is the sampling temperature; nil leaves the server's default.
	Temperature *float64 `json:"temperature,omitempty"`
	// TopP is the nucleus-sampling mass; nil leaves the server's default.
	TopP *float64 `json:"top_p,omitempty"`
	// TopK, MinP and the penalties are vLLM's sampling extensions; nil leaves them to
	// the server ([ChatCompletionRequest.SetSampling] sets them all).
	TopK *int `json:"top_k,omitempty"`
	// MinP is vLLM's min-p cutoff; nil leaves the server's default.
	MinP *float64 `json:"min_p,omitempty"`
	// RepetitionPenalty is vLLM's repetition penalty; nil leaves the server's default.
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	// PresencePenalty is the OpenAI presence penalty; nil leaves the server's default.
	PresencePenalty *float64 `json:"presence_penalty,omitempty"`
	// FrequencyPenalty is the OpenAI frequency penalty; nil leaves the server's default.
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	// Seed fixes the server's sampling seed; nil sends none.
	Seed *int64 `json:"seed,omitempty"`
	// Stop strings end a choice; the server strips them from the text. nil sends none.
	Stop []string `json:"stop,omitempty"`
	// ChatTemplateKwargs is passed to the template, for example {"enable_thinking": false}.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitzero"`
	// PromptLogprobs is the top-k at each position of the rendered prompt (vLLM's
	// extension); the answer carries them once, at the top level.
	PromptLogprobs *int `json:"prompt_logprobs,omitempty"`
	// ReturnTokenIDs asks for each choice's token_ids and the top-level
	// prompt_token_ids (vLLM 0.10.2+).
	ReturnTokenIDs bool `json:"return_token_ids,omitempty"`
	// Extra members are merged into the JSON body; a key that a field above already
	// sends is an error.
	Extra map[string]any `json:"-"`
}

// ChatCompletionResponse is the answer of POST /v1/chat/completions.
type ChatCompletionResponse struct {
	// ID is the server's response id.
	ID string
	// Model is the model name the server answered with.
	Model string
	// Choices are the returned messages, in the server's order.
	Choices []ChatChoice
	// Usage counts the request's tokens.
	Usage Usage
	// PromptLogprobs is the top-level prompt_logprobs of the rendered prompt, laid out
	// as for completions (position 0 has no entries); nil when not asked for.
	PromptLogprobs *PromptLogprobs
	// PromptTokenIDs are the ids of the rendered prompt (return_token_ids, 0.10.2+);
	// nil when the server did not send them.
	PromptTokenIDs []int32
}

// ChatChoice is one returned message.
type ChatChoice struct {
	// Index is the choice's position among the request's N choices.
	Index int `json:"index"`
	// Message holds the text and any parsed tool calls. A null content arrives as "".
	// Its ReasoningContent is what a reasoning parser split off: the message's
	// "reasoning" (newest vLLM) or else its "reasoning_content" (older releases).
	Message chat.Message `json:"message"`
	// ContentNull is true when the server sent "content": null (a reasoning parser
	// found no answer after the reasoning, or the message is only tool calls).
	ContentNull bool `json:"-"`
	// FinishReason is "stop", "length" or "tool_calls" ("abort" and others on some
	// servers); "" when the server sent null or no finish_reason.
	FinishReason string `json:"finish_reason"`
	// StopReason is the stop token id (a JSON number) or stop string that ended the
	// choice, or nil.
	StopReason any `json:"stop_reason"`
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
	maxTokens := req.MaxTokens
	if maxTokens == 0 {
		maxTokens = 32768 // the server fills the context
	}
	var out *ChatCompletionResponse
	err = c.post(ctx, c.to.generate(maxTokens), path, body, req.PromptLogprobs != nil, func(s *jsonscan.Scanner) (err error) {
		out, err = decodeChatCompletion(s)
		return err
	})
	if err != nil {
		return nil, err
	}
	if out.PromptLogprobs != nil && out.PromptTokenIDs != nil && out.PromptLogprobs.Len() != len(out.PromptTokenIDs) {
		return nil, fmt.Errorf("vllm: POST %s: prompt_logprobs has %d positions, prompt_token_ids %d", path, out.PromptLogprobs.Len(), len(out.PromptTokenIDs))
	}
	return out, nil
}

// DecodeChatCompletionResponse decodes a /v1/chat/completions response body, with
// the top-level prompt_logprobs read by the same scanner as for completions.
func DecodeChatCompletionResponse(data []byte) (*ChatCompletionResponse, error) {
	return decodeChatCompletion(&jsonscan.Scanner{Data: data})
}

// DecodeChatCompletionStream is [DecodeChatCompletionResponse] for a body read from r
// as it arrives, as [DecodeCompletionStream] is for completions.
func DecodeChatCompletionStream(r io.Reader) (*ChatCompletionResponse, error) {
	var out *ChatCompletionResponse
	err := decodeFrom(r, func(s *jsonscan.Scanner) (err error) {
		out, err = decodeChatCompletion(s)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func decodeChatCompletion(s *jsonscan.Scanner) (*ChatCompletionResponse, error) {
	out := &ChatCompletionResponse{}
	err := decodeResponse(s, &out.ID, &out.Model, &out.Usage, func(s *jsonscan.Scanner, k []byte) (bool, error) {
		var err error
		switch string(k) {
		case "choices":
			err = s.UnmarshalNext(&out.Choices)
		case "prompt_token_ids":
			err = s.UnmarshalNext(&out.PromptTokenIDs)
		case "prompt_logprobs":
			out.PromptLogprobs, err = decodeOptPromptLogprobs(s)
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return nil, err
	}
	for i, ch := range out.Choices {
		if err := checkIndex(i, ch.Index); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UnmarshalJSON reads a choice, with the message's reasoning under either name and
// whether its content was null.
func (c *ChatChoice) UnmarshalJSON(data []byte) error {
	type plain ChatChoice
	var aux struct {
		*plain
		Message struct {
			chat.Message
			Content          *string `json:"content"`
			Reasoning        *string `json:"reasoning"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"message"`
	}
	aux.plain = (*plain)(c)
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	m := aux.Message.Message
	m.Content, m.ReasoningContent = "", ""
	c.ContentNull = aux.Message.Content == nil
	if aux.Message.Content != nil {
		m.Content = *aux.Message.Content
	}
	switch {
	case aux.Message.Reasoning != nil:
		m.ReasoningContent = *aux.Message.Reasoning
	case aux.Message.ReasoningContent != nil:
		m.ReasoningContent = *aux.Message.ReasoningContent
	}
	c.Message = m
	return nil
}

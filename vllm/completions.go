package vllm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// CompletionRequest is a POST /v1/completions request with token-id prompts.
//
// Optional numbers are pointers: nil sends nothing and leaves the server's default,
// so that 0 (greedy temperature, logprobs of the chosen token only) can be asked for.
type CompletionRequest struct {
	// Model overrides the client's model.
	Model string
	// Prompts are token-id prompts. One prompt is sent as a flat list; several as a
	// batch, whose choices come back at index p*N+j (sample j of prompt p). The server
	// adds no BOS to token-id prompts.
	Prompts [][]int32
	// N is the number of samples per prompt; 0 means 1.
	N int
	// MaxTokens bounds each sample; 0 leaves the server's default (16).
	MaxTokens int
	// Temperature is the sampling temperature; nil leaves the server's default.
	Temperature *float64
	// TopP is the nucleus-sampling mass; nil leaves the server's default.
	TopP *float64
	// TopK, MinP and the penalties are vLLM's sampling extensions; nil leaves them to
	// the server ([CompletionRequest.SetSampling] sets them all).
	TopK *int
	// MinP is vLLM's min-p cutoff; nil leaves the server's default.
	MinP *float64
	// RepetitionPenalty is vLLM's repetition penalty; nil leaves the server's default.
	RepetitionPenalty *float64
	// PresencePenalty is the OpenAI presence penalty; nil leaves the server's default.
	PresencePenalty *float64
	// FrequencyPenalty is the OpenAI frequency penalty; nil leaves the server's default.
	FrequencyPenalty *float64
	// Seed fixes the server's sampling seed; nil sends none.
	Seed *int64
	// Stop strings. Prefer none: the server strips them from the text while the ids
	// keep them.
	Stop []string
	// Logprobs is the top-k of sampled tokens; 0 still returns the chosen token's.
	Logprobs *int
	// PromptLogprobs is the top-k at each prompt position (vLLM's extension).
	PromptLogprobs *int
	// ReturnTokenIDs asks for token_ids and prompt_token_ids (vLLM 0.10.2+).
	ReturnTokenIDs bool
	// ReturnTokensAsTokenIDs makes the logprobs block name tokens "token_id:N".
	ReturnTokensAsTokenIDs bool
	// SkipSpecialTokens is vLLM's skip_special_tokens for the decoded text; nil leaves
	// the server's default. It does not change the token ids.
	SkipSpecialTokens *bool
	// SpacesBetweenSpecialTokens is vLLM's spaces_between_special_tokens for the
	// decoded text; nil leaves the server's default.
	SpacesBetweenSpecialTokens *bool
	// Extra members are merged into the JSON body; a key that a field above already
	// sends is an error.
	Extra map[string]any
}

type completionBody struct {
	Model                      string   `json:"model"`
	N                          int      `json:"n,omitempty"`
	MaxTokens                  int      `json:"max_tokens,omitempty"`
	Temperature                *float64 `json:"temperature,omitempty"`
	TopP                       *float64 `json:"top_p,omitempty"`
	TopK                       *int     `json:"top_k,omitempty"`
	MinP                       *float64 `json:"min_p,omitempty"`
	RepetitionPenalty          *float64 `json:"repetition_penalty,omitempty"`
	PresencePenalty            *float64 `json:"presence_penalty,omitempty"`
	FrequencyPenalty           *float64 `json:"frequency_penalty,omitempty"`
	Seed                       *int64   `json:"seed,omitempty"`
	Stop                       []string `json:"stop,omitempty"`
	Logprobs                   *int     `json:"logprobs,omitempty"`
	PromptLogprobs             *int     `json:"prompt_logprobs,omitempty"`
	ReturnTokenIDs             bool     `json:"return_token_ids,omitempty"`
	ReturnTokensAsTokenIDs     bool     `json:"return_tokens_as_token_ids,omitempty"`
	SkipSpecialTokens          *bool    `json:"skip_special_tokens,omitempty"`
	SpacesBetweenSpecialTokens *bool    `json:"spaces_between_special_tokens,omitempty"`
}

// CompletionResponse is the answer of POST /v1/completions.
type CompletionResponse struct {
	// ID is the server's response id.
	ID string
	// Model is the model name the server answered with.
	Model string
	// Choices are the samples of all prompts, at index p*N+j.
	Choices []CompletionChoice
	// Usage counts the request's tokens.
	Usage Usage
}

// Usage counts tokens over all prompts and choices of a request.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`     // tokens of the prompt(s) as the server saw them
	CompletionTokens int `json:"completion_tokens"` // generated tokens of all choices
	TotalTokens      int `json:"total_tokens"`      // PromptTokens + CompletionTokens
}

// CompletionChoice is one sample.
type CompletionChoice struct {
	// Index is p*N+j for sample j of prompt p.
	Index int
	// Text is the decoded sample; for display and parsing only.
	Text string
	// FinishReason is "stop" or "length".
	FinishReason string
	// StopReason is the stop token id (a JSON number) or stop string that ended the
	// sample, or nil.
	StopReason any
	// TokenIDs are the generated ids, including the stop token: from "token_ids" when
	// the server sends it, else recovered from "token_id:N" strings of the logprobs
	// block; nil when neither is there.
	TokenIDs []int32
	// PromptTokenIDs are the prompt ids the server saw (return_token_ids, 0.10.2+).
	PromptTokenIDs []int32
	// Logprobs is the OpenAI-style block of sampled tokens, nil when not asked for.
	Logprobs *CompletionLogprobs
	// PromptLogprobs is vLLM's prompt_logprobs, nil when not asked for.
	PromptLogprobs *PromptLogprobs
}

// CompletionLogprobs is the OpenAI-style "logprobs" block of a completion choice.
type CompletionLogprobs struct {
	// Tokens are decoded strings, or "token_id:N" with return_tokens_as_token_ids.
	Tokens []string `json:"tokens"`
	// TokenLogprobs are parallel to Tokens; nil for an echoed first prompt token.
	// NegInfLogprob stands for −∞.
	TokenLogprobs []*float32 `json:"token_logprobs"`
	// TopLogprobs maps token strings to logprobs: the chosen token plus the top-k.
	TopLogprobs []map[string]float32 `json:"top_logprobs"`
	// TextOffset is each token's character offset in the choice's text, parallel to
	// Tokens; for display only.
	TextOffset []int `json:"text_offset"`
}

// Completions calls POST /v1/completions.
func (c *Client) Completions(ctx context.Context, req CompletionRequest) (*CompletionResponse, error) {
	return c.completions(ctx, req, decodeAll)
}

// decodeMode says which parts of a completion reply are decoded.
type decodeMode int

const (
	decodeAll decodeMode = iota
	// decodeNoTopLogprobs checks each choice's top_logprobs as strictly as decodeAll
	// and leaves TopLogprobs nil: a map per generated token that Generate never reads.
	decodeNoTopLogprobs
)

func (c *Client) completions(ctx context.Context, req CompletionRequest, mode decodeMode) (*CompletionResponse, error) {
	const path = "/v1/completions"
	body, sent, err := c.completionBody(ctx, req)
	if err != nil {
		return nil, err
	}
	mt := req.MaxTokens
	if mt == 0 {
		mt = 16 // the server's default
	}
	limit := c.to.generate(mt)
	if req.PromptLogprobs != nil {
		n := 0
		for _, p := range req.Prompts {
			n += len(p)
		}
		limit = c.to.score(n)
	}
	// With prompt_logprobs, the top-K of every prompt position: about 54 MB of JSON for
	// 16k tokens at K = 50, read as it arrives into arrays a fifth of its size.
	var resp *CompletionResponse
	err = c.post(ctx, limit, path, body, req.PromptLogprobs != nil, func(s *jsonscan.Scanner) (err error) {
		resp, err = decodeCompletion(s, mode, sent)
		return err
	})
	if err != nil {
		return nil, err
	}
	n := max(req.N, 1)
	if want := len(req.Prompts) * n; len(resp.Choices) != want {
		return nil, fmt.Errorf("vllm: POST %s: %d choices for %d prompts × n=%d", path, len(resp.Choices), len(req.Prompts), n)
	}
	return resp, nil
}

// completionBody encodes req; sent is its one prompt as the body carries it, nil
// for a batch.
func (c *Client) completionBody(ctx context.Context, req CompletionRequest) (body []byte, sent *sentPrompt, err error) {
	if len(req.Prompts) == 0 {
		return nil, nil, errors.New("vllm: POST /v1/completions: no prompt")
	}
	for i, p := range req.Prompts {
		if len(p) == 0 {
			return nil, nil, fmt.Errorf("vllm: POST /v1/completions: prompt %d is empty", i)
		}
	}
	if req.N < 0 || req.MaxTokens < 0 {
		return nil, nil, fmt.Errorf("vllm: POST /v1/completions: negative N (%d) or MaxTokens (%d)", req.N, req.MaxTokens)
	}
	m, err := c.modelFor(ctx, req.Model)
	if err != nil {
		return nil, nil, err
	}
	b := completionBody{
		Model: m, N: req.N, MaxTokens: req.MaxTokens, Temperature: req.Temperature,
		TopP: req.TopP, TopK: req.TopK, MinP: req.MinP, RepetitionPenalty: req.RepetitionPenalty,
		PresencePenalty: req.PresencePenalty, FrequencyPenalty: req.FrequencyPenalty, Seed: req.Seed, Stop: req.Stop, Logprobs: req.Logprobs,
		PromptLogprobs: req.PromptLogprobs, ReturnTokenIDs: req.ReturnTokenIDs,
		ReturnTokensAsTokenIDs: req.ReturnTokensAsTokenIDs, SkipSpecialTokens: req.SkipSpecialTokens,
		SpacesBetweenSpecialTokens: req.SpacesBetweenSpecialTokens,
	}
	if _, dup := req.Extra["prompt"]; dup {
		return nil, nil, errors.New(`vllm: POST /v1/completions: Extra key "prompt" is already set by a request field`)
	}
	rest, err := mergeExtra(b, req.Extra)
	if err != nil {
		return nil, nil, fmt.Errorf("vllm: POST /v1/completions: %w", err)
	}
	body = appendPrompt(rest, req.Prompts, &c.prompts)
	if len(req.Prompts) == 1 {
		// body is rest without its closing brace, a comma unless rest is {},
		// "prompt":, the list and the closing brace
		start := len(rest) - 1 + len(`"prompt":`)
		if len(rest) > 2 {
			start++
		}
		sent = &sentPrompt{ids: req.Prompts[0], json: body[start : len(body)-1]}
	}
	return body, sent, nil
}

// sentPrompt is the one prompt of a request: its ids and the JSON list the request
// sent them as.
type sentPrompt struct {
	ids  []int32
	json []byte
}

// echo reads a prompt_token_ids list at s that repeats sent.json byte for byte
// without parsing it, and reports whether it did; the ids are then a copy of
// sent.ids, which is what parsing those bytes gives.
func (sent *sentPrompt) echo(s *jsonscan.Scanner) ([]int32, bool) {
	if sent == nil {
		return nil, false
	}
	s.WS()
	if !bytes.HasPrefix(s.Data[s.Pos:], sent.json) {
		return nil, false
	}
	s.Pos += len(sent.json)
	return slices.Clone(sent.ids), true
}

// appendPrompt adds the "prompt" member to the encoded object obj: one prompt as a
// flat list of ids, several as a list of lists. The ids are written by hand, not
// through encoding/json: a prompt is up to a context's worth of ids, sent every turn.
// One prompt goes through pc, when not nil.
func appendPrompt(obj []byte, prompts [][]int32, pc *promptCache) []byte {
	n := len(obj) + len(`,"prompt":[]`) + 2*len(prompts) + 8 // jsonscan.AppendInt32 wants 8 bytes of room
	for _, p := range prompts {
		n += 7 * len(p) // six digits and a comma cover a vocabulary below 10⁶
	}
	out := make([]byte, 0, n)
	out = append(out, obj[:len(obj)-1]...) // without the closing brace
	if len(obj) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"prompt":`...)
	switch {
	case len(prompts) == 1 && pc != nil:
		out = pc.appendIDs(out, prompts[0])
	case len(prompts) == 1:
		out = jsonscan.AppendInt32s(out, prompts[0])
	default:
		out = append(out, '[')
		for i, p := range prompts {
			if i > 0 {
				out = append(out, ',')
			}
			out = jsonscan.AppendInt32s(out, p)
		}
		out = append(out, ']')
	}
	return append(out, '}')
}

// DecodeCompletionResponse decodes a /v1/completions response body. prompt_logprobs
// are read by a scanner straight into flat arrays; the small fields go through
// encoding/json.
func DecodeCompletionResponse(data []byte) (*CompletionResponse, error) {
	return decodeCompletionResponse(data, decodeAll)
}

func decodeCompletionResponse(data []byte, mode decodeMode) (*CompletionResponse, error) {
	return decodeCompletion(&jsonscan.Scanner{Data: data}, mode, nil)
}

// DecodeCompletionStream is [DecodeCompletionResponse] for a body read from r as it
// arrives, through a window of tens of KiB instead of the whole body; the client
// reads the answers that carry prompt_logprobs this way. On the same bytes it gives
// the same response, or the same error. A failed read of r ends decoding with an
// error that wraps the read's.
func DecodeCompletionStream(r io.Reader) (*CompletionResponse, error) {
	var resp *CompletionResponse
	err := decodeFrom(r, func(s *jsonscan.Scanner) (err error) {
		resp, err = decodeCompletion(s, decodeAll, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// decodeCompletion reads a /v1/completions response body from s, in memory or
// streamed; sent, when not nil, is the request's one prompt, which every choice's
// prompt_token_ids is expected to echo.
func decodeCompletion(s *jsonscan.Scanner, mode decodeMode, sent *sentPrompt) (*CompletionResponse, error) {
	out := &CompletionResponse{}
	err := decodeResponse(s, &out.ID, &out.Model, &out.Usage, func(s *jsonscan.Scanner, k []byte) (bool, error) {
		if string(k) != "choices" {
			return false, nil
		}
		return true, s.Array(true, func(i int) error {
			var ch CompletionChoice
			if err := decodeChoice(s, &ch, mode, sent); err != nil {
				return fmt.Errorf("choices[%d]: %w", i, err)
			}
			out.Choices = append(out.Choices, ch)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for i := range out.Choices {
		ch := &out.Choices[i]
		if err := checkIndex(i, ch.Index); err != nil {
			return nil, err
		}
		if ch.TokenIDs == nil && ch.Logprobs != nil && ch.Logprobs.Tokens != nil {
			ids, ok := tokenIDsFromStrings(ch.Logprobs.Tokens)
			if ok {
				ch.TokenIDs = ids
			}
		}
	}
	return out, nil
}

// decodeResponse reads the top-level object of a response body: id, model and usage
// into the given fields, the keys member takes (it reports whether it took k and then
// consumed the value), skipping the others; then it checks that nothing follows.
func decodeResponse(s *jsonscan.Scanner, id, model *string, usage *Usage, member func(s *jsonscan.Scanner, k []byte) (bool, error)) error {
	err := s.Object(false, func(k []byte) error {
		switch string(k) {
		case "id":
			return s.UnmarshalNext(id)
		case "model":
			return s.UnmarshalNext(model)
		case "usage":
			return s.UnmarshalNext(usage)
		}
		if took, err := member(s, k); took || err != nil {
			return err
		}
		_, err := s.Skip()
		return err
	})
	if err != nil {
		return err
	}
	return s.End()
}

// checkIndex checks that choice i says it is choice i.
func checkIndex(i, index int) error {
	if index != i {
		return fmt.Errorf("choices[%d] has index %d", i, index)
	}
	return nil
}

func decodeChoice(s *jsonscan.Scanner, ch *CompletionChoice, mode decodeMode, sent *sentPrompt) error {
	return s.Object(false, func(k []byte) error {
		switch string(k) {
		case "index":
			return s.UnmarshalNext(&ch.Index)
		case "text":
			return s.UnmarshalNext(&ch.Text)
		case "finish_reason":
			return s.UnmarshalNext(&ch.FinishReason)
		case "stop_reason":
			return s.UnmarshalNext(&ch.StopReason)
		case "token_ids":
			ids, err := s.Int32s()
			ch.TokenIDs = ids
			return err
		case "prompt_token_ids":
			if ids, ok := sent.echo(s); ok {
				ch.PromptTokenIDs = ids
				return nil
			}
			ids, err := s.Int32s()
			ch.PromptTokenIDs = ids
			return err
		case "logprobs":
			return decodeCompletionLogprobs(s, &ch.Logprobs, mode)
		case "prompt_logprobs":
			pl, err := decodeOptPromptLogprobs(s)
			if pl != nil { // a null after a list keeps the list
				ch.PromptLogprobs = pl
			}
			return err
		default:
			_, err := s.Skip()
			return err
		}
	})
}

// tokenIDsFromStrings parses "token_id:N" strings; ok is false unless all are.
func tokenIDsFromStrings(toks []string) ([]int32, bool) {
	ids := make([]int32, len(toks))
	for i, t := range toks {
		id, ok := parseTokenIDString(t)
		if !ok {
			return nil, false
		}
		ids[i] = id
	}
	return ids, true
}

// parseTokenIDString parses the "token_id:N" form that return_tokens_as_token_ids
// gives tokens.
func parseTokenIDString(s string) (int32, bool) {
	rest, ok := strings.CutPrefix(s, "token_id:")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// ChoicesOf returns the n samples of prompt p, choices[p*n : p*n+n], of a response
// to a batch with n samples per prompt.
func (r *CompletionResponse) ChoicesOf(p, n int) []CompletionChoice {
	return r.Choices[p*n : p*n+n]
}

package nemogym

// The request bodies as the Policy wrote them before it kept what it wrote between
// calls: every call's body from scratch. The tests check that the bodies sent now are
// these, byte for byte.

import (
	"encoding/json"
	"fmt"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/internal/jsonscan"
	"github.com/agentic-opd/agenticopd/rollout"
)

// tokenMembers writes a call's token fields as JSON object members, once per call: a
// late call replays every earlier one, and the bytes are the same each time.
func refTokenMembers(t TokenInfo) ([]byte, error) {
	b := make([]byte, 0, 64+7*(len(t.PromptTokenIDs)+len(t.GenerationTokenIDs))+12*len(t.GenerationLogProbs))
	b = append(b, `"prompt_token_ids":`...)
	b = jsonscan.AppendInt32s(b, t.PromptTokenIDs)
	b = append(b, `,"generation_token_ids":`...)
	b = jsonscan.AppendInt32s(b, t.GenerationTokenIDs)
	b = append(b, `,"generation_log_probs":`...)
	return appendFloats(b, t.GenerationLogProbs)
}

// refWithTokens attaches the calls' token fields (frags, in call order) to the last
// len(frags) assistant messages, in order.
func refWithTokens(msgs []chat.Message, frags [][]byte) ([]chatMessage, error) {
	out := make([]chatMessage, len(msgs))
	var assistants []int
	for i, m := range msgs {
		out[i].Message = m
		if m.Role == chat.RoleAssistant {
			assistants = append(assistants, i)
		}
	}
	if len(assistants) < len(frags) {
		return nil, fmt.Errorf("the conversation has %d assistant messages for %d earlier calls", len(assistants), len(frags))
	}
	for j, i := range assistants[len(assistants)-len(frags):] {
		out[i].tokens = frags[j]
	}
	return out, nil
}

// chatMessage is a chat message with the optional token fields, as JSON members.
type chatMessage struct {
	chat.Message
	tokens []byte
}

// appendJSON appends the message object with its token fields merged in.
func (m chatMessage) appendJSON(b []byte) ([]byte, error) {
	msg, err := json.Marshal(m.Message)
	if err != nil {
		return nil, err
	}
	if m.tokens == nil {
		return append(b, msg...), nil
	}
	b = append(b, msg[:len(msg)-1]...)
	if len(msg) > 2 {
		b = append(b, ',')
	}
	b = append(b, m.tokens...)
	return append(b, '}'), nil
}

// firstClass are the sampling fields NeMo Gym's chat parameters declare; the others
// (top_k, min_p, repetition_penalty) are dropped by its model server unless they come
// in metadata.extra_body.
var firstClass = map[string]bool{"temperature": true, "top_p": true, "presence_penalty": true, "frequency_penalty": true}

func (p *Policy) refBody(req rollout.GenerateRequest, s Sampling, msgs []chatMessage, tools []chat.Tool, kwargs map[string]any) ([]byte, error) {
	sp := req.Sampling.Resolved()
	if s.Temperature != nil {
		sp.Temperature = *s.Temperature
	}
	if s.TopP != nil {
		sp.TopP = *s.TopP
	}
	maxTokens := req.MaxTokens
	if s.MaxOutputTokens > 0 {
		maxTokens = min(maxTokens, s.MaxOutputTokens)
	}
	b := map[string]any{
		"model": p.cfg.Model, "max_tokens": maxTokens,
		"logprobs": true, "top_logprobs": 0,
	}
	// The engine's own fields travel twice: in metadata.extra_body (a JSON string),
	// which NeMo Gym's model server merges under the request, and at the top level,
	// which the trainer's server reads when called directly.
	extra := map[string]any{"skip_special_tokens": false, "include_stop_str_in_output": true}
	for k, v := range sp.Map() {
		b[k] = v
		if !firstClass[k] {
			extra[k] = v
		}
	}
	b["skip_special_tokens"], b["include_stop_str_in_output"] = false, true
	meta := map[string]string{}
	eb, err := json.Marshal(extra)
	if err != nil {
		return nil, err
	}
	meta["extra_body"] = string(eb)
	if len(tools) > 0 {
		b["tools"] = tools
	}
	if kwargs != nil {
		b["chat_template_kwargs"] = kwargs
		kw, err := json.Marshal(kwargs)
		if err != nil {
			return nil, fmt.Errorf("ChatTemplateKwargs: %w", err)
		}
		meta["chat_template_kwargs"] = string(kw)
	}
	b["metadata"] = meta
	if req.Seed != nil {
		b["seed"] = *req.Seed
	}
	rest, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	size := len(rest) + 64
	for _, m := range msgs {
		size += len(m.Content) + len(m.tokens) + 256
	}
	out := append(make([]byte, 0, size), `{"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		if out, err = m.appendJSON(out); err != nil {
			return nil, err
		}
	}
	out = append(out, "],"...)
	return append(out, rest[1:]...), nil
}

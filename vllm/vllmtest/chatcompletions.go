package vllmtest

import (
	"encoding/json"
	"net/http"
)

type chatRequest struct {
	Model                string            `json:"model"`
	Messages             []wireMessage     `json:"messages"`
	Tools                []json.RawMessage `json:"tools"`
	ToolChoice           json.RawMessage   `json:"tool_choice"`
	N                    *int              `json:"n"`
	MaxTokens            *int              `json:"max_tokens"`
	MaxCompletionTokens  *int              `json:"max_completion_tokens"`
	Temperature          *float64          `json:"temperature"`
	TopP                 *float64          `json:"top_p"`
	TopK                 *int              `json:"top_k"`
	MinP                 *float64          `json:"min_p"`
	RepetitionPenalty    *float64          `json:"repetition_penalty"`
	PresencePenalty      *float64          `json:"presence_penalty"`
	FrequencyPenalty     *float64          `json:"frequency_penalty"`
	Seed                 *int64            `json:"seed"`
	Stop                 json.RawMessage   `json:"stop"`
	StopTokenIDs         []int32           `json:"stop_token_ids"`
	Logprobs             bool              `json:"logprobs"`
	TopLogprobs          *int              `json:"top_logprobs"`
	PromptLogprobs       *int              `json:"prompt_logprobs"`
	ReturnTokenIDs       bool              `json:"return_token_ids"`
	AddGenerationPrompt  *bool             `json:"add_generation_prompt"`
	ContinueFinalMessage bool              `json:"continue_final_message"`
	ChatTemplateKwargs   map[string]any    `json:"chat_template_kwargs"`
	SkipSpecialTokens    *bool             `json:"skip_special_tokens"`
	Stream               bool              `json:"stream"`
}

func (s *Server) handleChatCompletions(w http.ResponseWriter, r *http.Request, body []byte) {
	var req chatRequest
	if !s.decodeBody(w, body, &req) {
		return
	}
	sp, prompt, text, e := s.validateChat(&req)
	if e != nil {
		s.writeAPIError(w, e)
		return
	}
	var texts []string
	if s.cfg.chatScript != nil {
		texts = s.cfg.chatScript(ChatScriptInput{
			Messages: toChatMessages(req.Messages), Tools: toChatTools(req.Tools), N: sp.n,
			Prompt: text, PromptTokens: prompt,
		})
	}
	choices := make([]genChoice, sp.n)
	for j := range choices {
		var text string
		if len(texts) > 0 {
			text = texts[j%len(texts)]
		}
		choices[j] = s.generate(prompt, sp, j, text, len(texts) > 0)
	}
	if r.Context().Err() != nil {
		return
	}
	parseTools := len(req.Tools) > 0 && string(req.ToolChoice) != `"none"`
	s.writeChat(w, &req, sp, prompt, choices, parseTools)
}

func (s *Server) validateChat(req *chatRequest) (sampling, []int32, string, *apiError) {
	sp := sampling{n: 1, temperature: 1, topP: 1, seed: req.Seed, stopIDs: req.StopTokenIDs,
		skipSpecial: true, logprobs: noLogprobs, promptLogprobs: noLogprobs}
	if req.Stream {
		return sp, nil, "", badRequest("streaming is not supported by vllmtest")
	}
	if e := s.checkModel(req.Model); e != nil {
		return sp, nil, "", e
	}
	if len(req.Messages) == 0 {
		return sp, nil, "", badRequest("1 validation error: messages must be a non-empty list")
	}
	e := s.validateSampling(samplingFields{
		n: req.N, temperature: req.Temperature, topP: req.TopP, topK: req.TopK, minP: req.MinP,
		repetition: req.RepetitionPenalty, presence: req.PresencePenalty, frequency: req.FrequencyPenalty,
		skipSpecial: req.SkipSpecialTokens, stop: req.Stop,
	}, &sp)
	if e != nil {
		return sp, nil, "", e
	}
	if req.TopLogprobs != nil && !req.Logprobs {
		return sp, nil, "", badRequest("1 validation error: Value error, when using `top_logprobs`, `logprobs` must be set to true.")
	}
	if req.Logprobs {
		if sp.logprobs, e = logprobsWidth(req.TopLogprobs, "top_logprobs", 0); e != nil {
			return sp, nil, "", e
		}
	}
	if sp.promptLogprobs, e = logprobsWidth(req.PromptLogprobs, "prompt_logprobs", sp.promptLogprobs); e != nil {
		return sp, nil, "", e
	}
	text, e := s.renderRequest(req.Messages, req.Tools, req.AddGenerationPrompt, req.ContinueFinalMessage, req.ChatTemplateKwargs)
	if e != nil {
		return sp, nil, "", e
	}
	prompt := s.tok.encode(text)
	// vLLM takes `max_completion_tokens or max_tokens` (so a 0 falls through) and,
	// when that is None, fills the context.
	maxTokens := req.MaxTokens
	if req.MaxCompletionTokens != nil && *req.MaxCompletionTokens != 0 {
		maxTokens = req.MaxCompletionTokens
	}
	if maxTokens == nil {
		if len(prompt) >= s.cfg.maxModelLen {
			return sp, nil, "", badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens in the messages, Please reduce the length of the messages.",
				s.cfg.maxModelLen, len(prompt))
		}
		sp.maxTokens = s.cfg.maxModelLen - len(prompt)
	} else {
		sp.maxTokens = *maxTokens
		if e := s.checkContext(len(prompt), sp.maxTokens); e != nil {
			return sp, nil, "", e
		}
	}
	if g := s.gen.maxTokens; g != nil && sp.maxTokens > *g {
		sp.maxTokens = *g
	}
	if e := s.checkLimits(sp); e != nil {
		return sp, nil, "", e
	}
	return sp, prompt, text, nil
}

type chatLogprob struct {
	Token       string           `json:"token"`
	Logprob     float32          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func (s *Server) writeChat(w http.ResponseWriter, req *chatRequest, sp sampling, prompt []int32, choices []genChoice, parseTools bool) {
	id := s.newID("chatcmpl-")
	j, flush := s.startGeneration(w, id, "chat.completion")
	defer flush()
	completion := 0
	for i, c := range choices {
		completion += len(c.ids)
		if i > 0 {
			j.raw(",")
		}
		msg := map[string]any{
			"role": "assistant", "content": c.text, "refusal": nil, "annotations": nil, "audio": nil,
			"function_call": nil, "tool_calls": []any{}, "reasoning": nil,
		}
		if s.cfg.reasoning {
			if r, content, ok := s.splitGenerated(c.text); ok {
				msg["reasoning"], msg["content"] = r, content
			}
		}
		finish := c.finish
		if text, _ := msg["content"].(string); parseTools {
			if content, calls, ok := parseToolCalls(text, "chatcmpl-tool-"+id[len("chatcmpl-"):]+"-"); ok {
				msg["tool_calls"] = calls
				msg["content"] = nil
				if content != "" {
					msg["content"] = content
				}
				finish = "tool_calls" // vLLM: whenever the auto parser found calls, even after a length cut
			}
		}
		j.raw(`{"index":`)
		j.int(int64(i))
		j.raw(`,"message":`)
		j.value(msg)
		j.raw(`,"logprobs":`)
		if sp.logprobs != noLogprobs {
			j.value(map[string]any{"content": s.chatLogprobs(c, sp.logprobs)})
		} else {
			j.raw("null")
		}
		j.choiceEnd(finish, c.stopReason, c.ids, req.ReturnTokenIDs)
		j.raw("}")
	}
	j.raw(`],`)
	j.usage(len(prompt), completion)
	s.writePromptFields(j, prompt, nil, sp.promptLogprobs, req.ReturnTokenIDs)
	j.raw(`,"system_fingerprint":null,"service_tier":null,"kv_transfer_params":null}`)
	j.raw("\n")
}

package vllmtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
)

type completionRequest struct {
	Model                  string          `json:"model"`
	Prompt                 json.RawMessage `json:"prompt"`
	MaxTokens              *int            `json:"max_tokens"`
	Temperature            *float64        `json:"temperature"`
	TopP                   *float64        `json:"top_p"`
	N                      *int            `json:"n"`
	Seed                   *int64          `json:"seed"`
	Stop                   json.RawMessage `json:"stop"`
	StopTokenIDs           []int32         `json:"stop_token_ids"`
	Logprobs               *int            `json:"logprobs"`
	PromptLogprobs         *int            `json:"prompt_logprobs"`
	Echo                   bool            `json:"echo"`
	ReturnTokensAsTokenIDs bool            `json:"return_tokens_as_token_ids"`
	ReturnTokenIDs         bool            `json:"return_token_ids"`
	SkipSpecialTokens      *bool           `json:"skip_special_tokens"`
	IncludeStopStrInOutput bool            `json:"include_stop_str_in_output"`
	Stream                 bool            `json:"stream"`
}

// sampling holds the validated generation parameters shared by both endpoints.
type sampling struct {
	n              int
	maxTokens      int
	temperature    float64
	topP           float64
	seed           *int64
	stop           []string
	stopIDs        []int32
	includeStop    bool
	skipSpecial    bool
	logprobs       int // noLogprobs, -1 (whole vocabulary) or k
	promptLogprobs int // noLogprobs, -1 (whole vocabulary) or k
}

// maxN bounds n, so that a bad request cannot exhaust memory.
const maxN = 1024

// noLogprobs marks logprobs that were not asked for.
const noLogprobs = -2

// parsePrompts reads the prompt field: a string, a list of strings, a list of ids or a
// list of id lists.
func (s *Server) parsePrompts(raw json.RawMessage) ([][]int32, *apiError) {
	empty := badRequest("Either prompt or prompt_embeds must be provided and non-empty.")
	if len(raw) == 0 || string(raw) == "null" {
		return nil, empty
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		if str == "" {
			return nil, empty
		}
		return [][]int32{s.tok.encode(str)}, nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		if len(strs) == 0 {
			return nil, empty
		}
		out := make([][]int32, len(strs))
		for i, p := range strs {
			if p == "" {
				return nil, empty
			}
			out[i] = s.tok.encode(p)
		}
		return out, nil
	}
	var flat []int32
	if json.Unmarshal(raw, &flat) == nil {
		if len(flat) == 0 {
			return nil, empty
		}
		return [][]int32{flat}, s.checkIDs(flat)
	}
	var batch [][]int32
	if err := json.Unmarshal(raw, &batch); err != nil {
		return nil, badRequest("1 validation error: prompt must be a string, a list of strings, a list of token ids or a list of token-id lists")
	}
	if len(batch) == 0 {
		return nil, empty
	}
	for _, p := range batch {
		if len(p) == 0 {
			return nil, empty
		}
		if e := s.checkIDs(p); e != nil {
			return nil, e
		}
	}
	return batch, nil
}

func (s *Server) checkIDs(ids []int32) *apiError {
	for _, id := range ids {
		if id < 0 || int(id) >= s.tok.vocabSize() {
			return badRequest("Token id %d is out of vocabulary", id)
		}
	}
	return nil
}

func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("1 validation error: stop must be a string or a list of strings")
	}
	return many, nil
}

// checkLogprobs applies the --max-logprobs cap, with vLLM's messages.
func (s *Server) checkLogprobs(kind string, k int) *apiError {
	if k == -1 {
		k = s.tok.vocabSize()
	}
	if s.cfg.maxLogprobs >= 0 && k > s.cfg.maxLogprobs {
		return badRequest("Requested %s logprobs of %d, which is greater than max allowed: %d", kind, k, s.cfg.maxLogprobs)
	}
	return nil
}

func (s *Server) checkContext(promptLen, maxTokens int) *apiError {
	if promptLen+maxTokens > s.cfg.maxModelLen {
		return badRequest("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.cfg.maxModelLen, promptLen+maxTokens, promptLen, maxTokens)
	}
	return nil
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request, body []byte) {
	var req completionRequest
	if !s.decodeBody(w, body, &req) {
		return
	}
	sp, prompts, e := s.validateCompletion(&req)
	if e != nil {
		s.writeAPIError(w, e)
		return
	}
	choices := make([]genChoice, 0, len(prompts)*sp.n)
	for p, prompt := range prompts {
		choices = append(choices, s.generateChoices(prompt, p, sp)...)
	}
	if r.Context().Err() != nil {
		return
	}
	s.writeCompletion(w, &req, sp, prompts, choices)
}

func (s *Server) validateCompletion(req *completionRequest) (sampling, [][]int32, *apiError) {
	sp := sampling{n: 1, maxTokens: 16, temperature: 1, topP: 1, seed: req.Seed, stopIDs: req.StopTokenIDs,
		includeStop: req.IncludeStopStrInOutput, skipSpecial: true, logprobs: noLogprobs, promptLogprobs: noLogprobs}
	if req.Stream {
		return sp, nil, badRequest("streaming is not supported by vllmtest")
	}
	if e := s.checkModel(req.Model); e != nil {
		return sp, nil, e
	}
	if req.N != nil {
		sp.n = *req.N
	}
	if sp.n < 1 {
		return sp, nil, badRequest("n must be at least 1, got %d.", sp.n)
	}
	if sp.n > maxN {
		return sp, nil, badRequest("n must be at most %d in vllmtest, got %d.", maxN, sp.n)
	}
	if req.MaxTokens != nil {
		sp.maxTokens = *req.MaxTokens
	}
	if req.Temperature != nil {
		sp.temperature = *req.Temperature
	}
	if sp.temperature < 0 {
		return sp, nil, badRequest("temperature must be non-negative, got %g.", sp.temperature)
	}
	if req.TopP != nil {
		sp.topP = *req.TopP
	}
	if sp.topP <= 0 || sp.topP > 1 {
		return sp, nil, badRequest("top_p must be in (0, 1], got %g.", sp.topP)
	}
	if req.SkipSpecialTokens != nil {
		sp.skipSpecial = *req.SkipSpecialTokens
	}
	var e *apiError
	if sp.stop, e = parseStop(req.Stop); e != nil {
		return sp, nil, e
	}
	if req.Logprobs != nil {
		if *req.Logprobs < 0 && *req.Logprobs != -1 {
			return sp, nil, badRequest("1 validation error: Value error, `logprobs` must be a positive value.")
		}
		sp.logprobs = *req.Logprobs
	}
	if req.PromptLogprobs != nil {
		if *req.PromptLogprobs < 0 && *req.PromptLogprobs != -1 {
			return sp, nil, badRequest("1 validation error: Value error, `prompt_logprobs` must be a positive value.")
		}
		sp.promptLogprobs = *req.PromptLogprobs
	}
	prompts, e := s.parsePrompts(req.Prompt)
	if e != nil {
		return sp, nil, e
	}
	for _, p := range prompts {
		if e := s.checkContext(len(p), sp.maxTokens); e != nil {
			return sp, nil, e
		}
	}
	if sp.maxTokens < 1 {
		return sp, nil, badRequest("max_tokens must be at least 1, got %d.", sp.maxTokens)
	}
	if req.Logprobs != nil {
		if e := s.checkLogprobs("sample", sp.logprobs); e != nil {
			return sp, nil, e
		}
	}
	if req.PromptLogprobs != nil {
		if e := s.checkLogprobs("prompt", sp.promptLogprobs); e != nil {
			return sp, nil, e
		}
	}
	return sp, prompts, nil
}

// genChoice is one generated choice.
type genChoice struct {
	continuation
	prompt     []int32
	stopReason any // nil, a stop string or a stop token id
	text       string
}

func (sp *sampling) rng(j int) *rand.Rand {
	if sp.seed != nil {
		return rand.New(rand.NewPCG(uint64(*sp.seed), uint64(j)))
	}
	return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
}

// generateChoices produces the n choices of one /v1/completions prompt.
func (s *Server) generateChoices(prompt []int32, p int, sp sampling) []genChoice {
	var in *ScriptInput
	if s.cfg.agentScript != nil {
		text, _ := s.tok.decode(prompt, false)
		for _, g := range generationPrompts {
			if strings.HasSuffix(text, g) {
				msgs, hasTools := parseConversation(text)
				turn := 1
				for _, m := range msgs {
					if m.Role == chat.RoleAssistant {
						turn++
					}
				}
				in = &ScriptInput{Messages: msgs, HasTools: hasTools, Turn: turn, Prompt: text, PromptTokens: prompt, PromptIndex: p, Seed: sp.seed}
				break
			}
		}
	}
	out := make([]genChoice, sp.n)
	for j := range out {
		var c continuation
		scripted := false
		if in != nil {
			ci := *in
			ci.Messages = chat.Clone(in.Messages)
			ci.Choice = j
			if text, ok := s.cfg.agentScript(ci); ok {
				c = s.lm.force(prompt, s.scriptIDs(text), sp.maxTokens)
				scripted = true
			}
		}
		if !scripted {
			c = s.sample(prompt, sp, j)
		}
		out[j] = s.finish(prompt, c, sp)
	}
	return out
}

// scriptIDs tokenizes scripted text and closes the turn with <|im_end|>.
func (s *Server) scriptIDs(text string) []int32 {
	ids := s.tok.encode(text)
	if len(ids) == 0 || !isStop(ids[len(ids)-1]) {
		ids = append(ids, ImEnd)
	}
	return ids
}

// sample generates from the model.
func (s *Server) sample(prompt []int32, sp sampling, j int) continuation {
	return s.lm.generate(prompt, sp.maxTokens, sp.temperature, sp.topP, sp.rng(j))
}

// finish applies stop ids and stop strings and computes the text.
func (s *Server) finish(prompt []int32, c continuation, sp sampling) genChoice {
	// generation ends at the first stop id (an end-of-turn id, or one of
	// stop_token_ids), wherever it came from
	for k, id := range c.ids {
		if isStop(id) || slices.Contains(sp.stopIDs, id) {
			c.ids, c.logprobs, c.finish = c.ids[:k+1], c.logprobs[:k+1], "stop"
			break
		}
	}
	g := genChoice{continuation: c, prompt: prompt}
	textIDs := c.ids
	if n := len(c.ids); n > 0 && c.finish == "stop" {
		// stop_reason is null only for the tokenizer's eos (<|im_end|>): vLLM adds the
		// other eos ids of generation_config (<|endoftext|>) to stop_token_ids, so they
		// are named like any stop id.
		if last := c.ids[n-1]; last != ImEnd {
			g.stopReason = last
		}
		if !sp.includeStop {
			textIDs = c.ids[:n-1] // the stop token is not part of the text
		}
	}
	text, _ := s.tok.decode(textIDs, sp.skipSpecial)
	if len(sp.stop) > 0 {
		longest := 0
		for _, st := range sp.stop {
			longest = max(longest, len(st))
		}
		var b []byte
		for k, id := range textIDs {
			from := max(0, len(b)-longest+1)
			if !(sp.skipSpecial && isSkippedSpecial(id)) {
				b = append(b, s.tok.pieces[id]...)
			}
			if st, at := firstStop(string(b[from:]), sp.stop); at >= 0 {
				at += from
				g.ids, g.logprobs, g.finish, g.stopReason = c.ids[:k+1], c.logprobs[:k+1], "stop", st
				if sp.includeStop {
					text = string(b[:at+len(st)])
				} else {
					text = string(b[:at])
				}
				break
			}
		}
	}
	g.text = text
	return g
}

func firstStop(text string, stops []string) (string, int) {
	best, at := "", -1
	for _, st := range stops {
		if st == "" {
			continue
		}
		if i := strings.Index(text, st); i >= 0 && (at < 0 || i < at) {
			best, at = st, i
		}
	}
	return best, at
}

func (s *Server) newID(prefix string) string {
	return prefix + strconv.FormatUint(s.ids.Add(1), 16) + fmt.Sprintf("%08x", rand.Uint32())
}

func (s *Server) writeCompletion(w http.ResponseWriter, req *completionRequest, sp sampling, prompts [][]int32, choices []genChoice) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	j := &jw{w: bw}
	j.raw(`{"id":`)
	j.str(s.newID("cmpl-"))
	j.raw(`,"object":"text_completion","created":`)
	j.int(time.Now().Unix())
	j.raw(`,"model":`)
	j.str(s.cfg.model)
	j.raw(`,"choices":[`)
	promptTokens, completionTokens := 0, 0
	for _, p := range prompts {
		promptTokens += len(p)
	}
	for i, c := range choices {
		completionTokens += len(c.ids)
		if i > 0 {
			j.raw(",")
		}
		j.raw(`{"index":`)
		j.int(int64(i))
		j.raw(`,"text":`)
		text := c.text
		if req.Echo {
			pt, _ := s.tok.decode(c.prompt, sp.skipSpecial)
			text = pt + text
		}
		j.str(text)
		j.raw(`,"logprobs":`)
		if sp.logprobs != noLogprobs {
			s.writeLegacyLogprobs(j, c, sp.logprobs, req.ReturnTokensAsTokenIDs)
		} else {
			j.raw("null")
		}
		j.raw(`,"finish_reason":`)
		j.str(c.finish)
		j.raw(`,"stop_reason":`)
		j.value(c.stopReason)
		j.raw(`,"token_ids":`)
		if req.ReturnTokenIDs {
			j.ids(c.ids)
		} else {
			j.raw("null")
		}
		j.raw(`,"prompt_logprobs":`)
		if sp.promptLogprobs != noLogprobs {
			s.writePromptLogprobs(j, c.prompt, sp.promptLogprobs)
		} else {
			j.raw("null")
		}
		j.raw(`,"prompt_token_ids":`)
		if req.ReturnTokenIDs {
			j.ids(c.prompt)
		} else {
			j.raw("null")
		}
		j.raw("}")
	}
	j.raw(`],"usage":{"prompt_tokens":`)
	j.int(int64(promptTokens))
	j.raw(`,"total_tokens":`)
	j.int(int64(promptTokens + completionTokens))
	j.raw(`,"completion_tokens":`)
	j.int(int64(completionTokens))
	j.raw(`,"prompt_tokens_details":null},"system_fingerprint":null,"service_tier":null,"kv_transfer_params":null}`)
	j.raw("\n")
}

package vllmtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

type completionRequest struct {
	Model                  string          `json:"model"`
	Prompt                 json.RawMessage `json:"prompt"`
	MaxTokens              *int            `json:"max_tokens"`
	Temperature            *float64        `json:"temperature"`
	TopP                   *float64        `json:"top_p"`
	TopK                   *int            `json:"top_k"`
	MinP                   *float64        `json:"min_p"`
	RepetitionPenalty      *float64        `json:"repetition_penalty"`
	PresencePenalty        *float64        `json:"presence_penalty"`
	FrequencyPenalty       *float64        `json:"frequency_penalty"`
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

	promptIDs []int32 // Prompt read as a flat list of ids, when decodeIDPrompt did
}

// parsePrompts reads the prompt field: a string, a list of strings, a list of ids or a
// list of id lists.
// ids, when not nil, are raw already read as a flat list of ids (decodeIDPrompt).
func (s *Server) parsePrompts(raw json.RawMessage, ids []int32) ([][]int32, *apiError) {
	empty := badRequest("Either prompt or prompt_embeds must be provided and non-empty.")
	if len(raw) == 0 || string(raw) == "null" {
		return nil, empty
	}
	if ids != nil {
		if len(ids) == 0 {
			return nil, empty
		}
		return [][]int32{ids}, s.checkIDs(ids)
	}
	if flat, ok := int32Array(raw); ok { // the common case, without trying every shape
		if len(flat) == 0 {
			return nil, empty
		}
		return [][]int32{flat}, s.checkIDs(flat)
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

// decodeIDPrompt decodes a request whose prompt is a flat list of ids, as
// encoding/json would, without encoding/json reading the ids: the other members go
// through encoding/json with the prompt replaced by null, and the ids are read by the
// scanner, which takes exactly the lists of integers encoding/json takes. It reports
// false, having decoded nothing, for any other body (another prompt shape, a key that
// encoding/json would also match to the prompt, malformed JSON); decodeBody then
// decodes it, errors and all.
func decodeIDPrompt(body []byte, req *completionRequest) bool {
	sc := jsonscan.Scanner{Data: body}
	start, end := -1, -1
	var ids []int32
	err := sc.Object(false, func(k []byte) error {
		if !strings.EqualFold(string(k), "prompt") {
			_, err := sc.Skip()
			return err
		}
		if string(k) != "prompt" || start >= 0 || sc.Peek() != '[' {
			return errNotIDPrompt
		}
		start = sc.Pos
		var err error
		ids, err = sc.Int32s()
		end = sc.Pos
		return err
	})
	if err != nil || sc.End() != nil || start < 0 {
		return false
	}
	rest := make([]byte, 0, len(body)-(end-start)+len("null"))
	rest = append(append(append(rest, body[:start]...), "null"...), body[end:]...)
	var out completionRequest
	if json.Unmarshal(rest, &out) != nil {
		return false
	}
	out.Prompt, out.promptIDs = body[start:end], ids
	*req = out
	return true
}

var errNotIDPrompt = errors.New("not a request with one prompt member")

// int32Array reads raw as a flat list of ids; ok is false when it is anything else.
func int32Array(raw json.RawMessage) ([]int32, bool) {
	sc := jsonscan.Scanner{Data: raw}
	if sc.Peek() != '[' {
		return nil, false
	}
	ids, err := sc.Int32s()
	if err != nil || ids == nil || sc.End() != nil {
		return nil, false
	}
	return ids, true
}

func (s *Server) checkIDs(ids []int32) *apiError {
	for _, id := range ids {
		if id < 0 || int(id) >= s.tok.vocabSize() {
			return badRequest("Token id %d is out of vocabulary", id)
		}
	}
	return nil
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request, body []byte) {
	var req completionRequest
	if !decodeIDPrompt(body, &req) && !s.decodeBody(w, body, &req) {
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
	if req.MaxTokens != nil {
		sp.maxTokens = *req.MaxTokens
	}
	if req.Stream {
		return sp, nil, badRequest("streaming is not supported by vllmtest")
	}
	if e := s.checkModel(req.Model); e != nil {
		return sp, nil, e
	}
	e := s.validateSampling(samplingFields{
		n: req.N, temperature: req.Temperature, topP: req.TopP, topK: req.TopK, minP: req.MinP,
		repetition: req.RepetitionPenalty, presence: req.PresencePenalty, frequency: req.FrequencyPenalty,
		skipSpecial: req.SkipSpecialTokens, stop: req.Stop,
	}, &sp)
	if e != nil {
		return sp, nil, e
	}
	if sp.logprobs, e = logprobsWidth(req.Logprobs, "logprobs", sp.logprobs); e != nil {
		return sp, nil, e
	}
	if sp.promptLogprobs, e = logprobsWidth(req.PromptLogprobs, "prompt_logprobs", sp.promptLogprobs); e != nil {
		return sp, nil, e
	}
	prompts, e := s.parsePrompts(req.Prompt, req.promptIDs)
	if e != nil {
		return sp, nil, e
	}
	for _, p := range prompts {
		if e := s.checkContext(len(p), sp.maxTokens); e != nil {
			return sp, nil, e
		}
	}
	if e := s.checkLimits(sp); e != nil {
		return sp, nil, e
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
		text, _ := s.tok.decodeTurns(prompt)
		for _, g := range generationPrompts {
			if strings.HasSuffix(text, g) {
				msgs, hasTools := parseConversation(text, &s.calls)
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
		var text string
		scripted := false
		if in != nil {
			ci := *in
			ci.Messages = chat.Clone(in.Messages)
			ci.Choice = j
			text, scripted = s.cfg.agentScript(ci)
		}
		out[j] = s.generate(prompt, sp, j, text, scripted)
	}
	return out
}

// generate makes choice j of prompt: text when scripted, else a sample of the model,
// then applies the stop rules.
func (s *Server) generate(prompt []int32, sp sampling, j int, text string, scripted bool) genChoice {
	var c continuation
	if scripted {
		c = s.genModel(prompt).force(prompt, s.scriptIDs(text), sp.maxTokens)
	} else {
		c = s.sample(prompt, sp, j)
	}
	return s.finish(prompt, c, sp)
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
	return s.genModel(prompt).generate(prompt, sp.maxTokens, sp.params(), sp.rng(j))
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
	j, flush := s.startGeneration(w, s.newID("cmpl-"), "text_completion")
	defer flush()
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
		j.choiceEnd(c.finish, c.stopReason, c.ids, req.ReturnTokenIDs)
		s.writePromptFields(j, c.prompt, req.promptIDsJSON(), sp.promptLogprobs, req.ReturnTokenIDs)
		j.raw("}")
	}
	j.raw(`],`)
	j.usage(promptTokens, completionTokens)
	j.raw(`,"system_fingerprint":null,"service_tier":null,"kv_transfer_params":null}`)
	j.raw("\n")
}

// startGeneration answers 200 and writes a generation response up to the opening of
// its choices array; flush must run once the response is complete.
func (s *Server) startGeneration(w http.ResponseWriter, id, object string) (j *jw, flush func()) {
	w.Header().Set("Content-Type", "application/json")
	sw := &sizedWriter{w: w}
	if b, ok := s.bufs.Get().(*[]byte); ok {
		sw.buf = (*b)[:0]
	} else {
		sw.buf = make([]byte, 0, streamChunk)
	}
	bw := bufio.NewWriterSize(sw, 4<<10) // sw holds the response: this only batches small writes
	j = &jw{w: bw}
	j.raw(`{"id":`)
	j.str(id)
	j.raw(`,"object":`)
	j.str(object)
	j.raw(`,"created":`)
	j.int(time.Now().Unix())
	j.raw(`,"model":`)
	j.str(s.cfg.model)
	j.raw(`,"choices":[`)
	return j, func() {
		_ = bw.Flush()
		sw.close()
		if cap(sw.buf) <= 4*streamChunk { // the response went out: its buffer is free
			s.bufs.Put(&sw.buf)
		}
	}
}

// sizedWriter answers 200 with a Content-Length, as vLLM does (it renders a whole
// response before sending it), for responses of up to maxSized bytes; a larger one
// (prompt logprobs of a long prompt) is streamed in chunks of streamChunk bytes from
// the first byte past that, so that the simulator never holds it whole.
type sizedWriter struct {
	w       http.ResponseWriter
	buf     []byte
	started bool // headers sent without a length: streaming
}

const (
	maxSized    = 4 << 20
	streamChunk = 64 << 10
)

func (s *sizedWriter) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	if !s.started && len(s.buf) > maxSized {
		s.started = true
		s.w.WriteHeader(http.StatusOK)
	}
	if s.started && len(s.buf) >= streamChunk {
		if _, err := s.w.Write(s.buf); err != nil {
			return 0, err
		}
		s.buf = s.buf[:0]
	}
	return len(p), nil
}

// close sends what is left: a response that was never streamed, with its length.
func (s *sizedWriter) close() {
	if !s.started {
		s.w.Header().Set("Content-Length", strconv.Itoa(len(s.buf)))
		s.w.WriteHeader(http.StatusOK)
	}
	if len(s.buf) > 0 {
		_, _ = s.w.Write(s.buf)
	}
}

// choiceEnd writes the fields both endpoints close a choice with: finish_reason,
// stop_reason and token_ids (null unless returnIDs).
func (j *jw) choiceEnd(finish string, stopReason any, ids []int32, returnIDs bool) {
	j.raw(`,"finish_reason":`)
	j.str(finish)
	j.raw(`,"stop_reason":`)
	j.value(stopReason)
	j.raw(`,"token_ids":`)
	j.idsOrNull(ids, returnIDs)
}

// promptIDsJSON is the request's text of its one prompt when decodeIDPrompt read it
// as a flat list of ids, else nil.
func (req *completionRequest) promptIDsJSON() []byte {
	if req.promptIDs == nil {
		return nil
	}
	return req.Prompt
}

// writePromptFields writes prompt_logprobs (null when k is noLogprobs) and
// prompt_token_ids (null unless returnIDs), each after a comma. sent, when not nil,
// is the request's text of prompt (see jw.echoIDs).
func (s *Server) writePromptFields(j *jw, prompt []int32, sent []byte, k int, returnIDs bool) {
	j.raw(`,"prompt_logprobs":`)
	if k != noLogprobs {
		s.writePromptLogprobs(j, prompt, k)
	} else {
		j.raw("null")
	}
	j.raw(`,"prompt_token_ids":`)
	switch {
	case !returnIDs:
		j.raw("null")
	case sent != nil:
		j.echoIDs(prompt, sent)
	default:
		j.ids(prompt)
	}
}

// usage writes the usage field.
func (j *jw) usage(prompt, completion int) {
	j.raw(`"usage":{"prompt_tokens":`)
	j.int(int64(prompt))
	j.raw(`,"total_tokens":`)
	j.int(int64(prompt + completion))
	j.raw(`,"completion_tokens":`)
	j.int(int64(completion))
	j.raw(`,"prompt_tokens_details":null}`)
}

package vllmtest

import "encoding/json"

// sampling holds the validated generation parameters shared by both endpoints.
type sampling struct {
	// maxTokens is capped by a generation config's max_tokens in validateSampling
	n              int
	maxTokens      int
	temperature    float64
	topP           float64
	topK           int
	minP           float64
	repetition     float64
	presence       float64
	frequency      float64
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

// samplingFields are the request fields both generation endpoints share.
type samplingFields struct {
	n           *int
	temperature *float64
	topP        *float64
	topK        *int
	minP        *float64
	repetition  *float64
	presence    *float64
	frequency   *float64
	skipSpecial *bool
	stop        json.RawMessage
}

// validateSampling checks the sampling fields both endpoints share, in vLLM's order,
// into sp.
func (s *Server) validateSampling(f samplingFields, sp *sampling) *apiError {
	if f.n != nil {
		sp.n = *f.n
	}
	if sp.n < 1 {
		return badRequest("n must be at least 1, got %d.", sp.n)
	}
	if sp.n > maxN {
		return badRequest("n must be at most %d in vllmtest, got %d.", maxN, sp.n)
	}
	g := s.gen
	sp.temperature = pick(f.temperature, g.temperature, sp.temperature)
	sp.topP = pick(f.topP, g.topP, sp.topP)
	sp.topK = pick(f.topK, g.topK, 0)
	sp.minP = pick(f.minP, g.minP, 0)
	sp.repetition = pick(f.repetition, g.repetition, 1)
	sp.presence = pick(f.presence, nil, 0)
	sp.frequency = pick(f.frequency, nil, 0)
	if g.maxTokens != nil && sp.maxTokens > *g.maxTokens {
		sp.maxTokens = *g.maxTokens // vLLM: min(request, generation_config's max_new_tokens)
	}
	if sp.topK < -1 {
		return badRequest("top_k must be 0 or -1 (disable), or at least 1, got %d.", sp.topK)
	}
	if sp.minP < 0 || sp.minP > 1 {
		return badRequest("min_p must be in [0, 1], got %g.", sp.minP)
	}
	if sp.repetition <= 0 {
		return badRequest("repetition_penalty must be greater than zero, got %g.", sp.repetition)
	}
	if sp.presence < -2 || sp.presence > 2 || sp.frequency < -2 || sp.frequency > 2 {
		return badRequest("presence_penalty and frequency_penalty must be in [-2, 2], got %g and %g.", sp.presence, sp.frequency)
	}
	if sp.temperature < 0 {
		return badRequest("temperature must be non-negative, got %g.", sp.temperature)
	}
	if sp.topP <= 0 || sp.topP > 1 {
		return badRequest("top_p must be in (0, 1], got %g.", sp.topP)
	}
	if f.skipSpecial != nil {
		sp.skipSpecial = *f.skipSpecial
	}
	var e *apiError
	sp.stop, e = parseStop(f.stop)
	return e
}

// logprobsWidth reads a logprobs width field (-1 for the whole vocabulary); def when
// the field is absent.
func logprobsWidth(v *int, field string, def int) (int, *apiError) {
	if v == nil {
		return def, nil
	}
	if *v < 0 && *v != -1 {
		return def, badRequest("1 validation error: Value error, `%s` must be a positive value.", field)
	}
	return *v, nil
}

// checkLimits applies the checks that follow the prompt: at least one token to
// generate, and the --max-logprobs cap.
func (s *Server) checkLimits(sp sampling) *apiError {
	if sp.maxTokens < 1 {
		return badRequest("max_tokens must be at least 1, got %d.", sp.maxTokens)
	}
	if sp.logprobs != noLogprobs {
		if e := s.checkLogprobs("sample", sp.logprobs); e != nil {
			return e
		}
	}
	if sp.promptLogprobs != noLogprobs {
		if e := s.checkLogprobs("prompt", sp.promptLogprobs); e != nil {
			return e
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

func (sp sampling) params() samplerParams {
	return samplerParams{temperature: sp.temperature, topP: sp.topP, topK: sp.topK, minP: sp.minP,
		repetition: sp.repetition, presence: sp.presence, frequency: sp.frequency}
}

package vllmtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
)

// generationConfigKeys are the keys vLLM takes from a model's generation_config.json
// as server defaults (ModelConfig.get_diff_sampling_param; max_new_tokens arrives as
// max_tokens).
var generationConfigKeys = map[string]bool{
	"temperature": true, "top_p": true, "top_k": true, "min_p": true, "repetition_penalty": true, "max_tokens": true,
}

// WithGenerationConfig makes the server behave as vLLM with --generation-config auto
// for a model whose generation_config.json holds defaults: each of temperature,
// top_p, top_k, min_p and repetition_penalty that a request leaves out (or sends as
// null) takes the value in defaults instead of the OpenAI default, and max_tokens, when
// given, caps every request's max_tokens. Sampling follows the resulting values, while
// returned logprobs stay raw, as with vLLM's default --logprobs-mode. For Qwen3, vLLM
// logs "Using default chat sampling params from model: {'temperature': 0.6, 'top_k':
// 20, 'top_p': 0.95}"; WithGenerationConfig(map[string]any{"temperature": 0.6,
// "top_k": 20, "top_p": 0.95}) reproduces it. Other keys make Start fail.
func WithGenerationConfig(defaults map[string]any) Option {
	return func(c *config) { c.genConfig = defaults }
}

// genDefaults are the parsed server defaults; nil fields are absent.
type genDefaults struct {
	temperature, topP, minP, repetition *float64
	topK, maxTokens                     *int
}

func parseGenerationConfig(m map[string]any) (genDefaults, error) {
	var g genDefaults
	for k, v := range m {
		if !generationConfigKeys[k] {
			return g, fmt.Errorf("generation config key %q is not one vLLM takes as a sampling default", k)
		}
		f, ok := toFloat(v)
		if !ok {
			return g, fmt.Errorf("generation config %s: %v is not a number", k, v)
		}
		switch k {
		case "temperature":
			g.temperature = &f
		case "top_p":
			g.topP = &f
		case "min_p":
			g.minP = &f
		case "repetition_penalty":
			g.repetition = &f
		case "top_k":
			n := int(f)
			g.topK = &n
		case "max_tokens":
			n := int(f)
			g.maxTokens = &n
		}
	}
	return g, nil
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return 0, false
}

// pick returns the request's value, else the server default, else def.
func pick[T any](req, server *T, def T) T {
	switch {
	case req != nil:
		return *req
	case server != nil:
		return *server
	}
	return def
}

// samplerParams are the values one sample is drawn with.
type samplerParams struct {
	temperature, topP, minP float64
	topK                    int
	repetition              float64
	presence, frequency     float64
}

// plain reports whether nothing but temperature and top_p shapes the draw.
func (p samplerParams) plain() bool {
	return p.topK <= 0 && p.minP == 0 && p.repetition == 1 && p.presence == 0 && p.frequency == 0
}

// sampleFull draws the next id after seq (whose last nOut ids were generated) under
// every parameter, in vLLM's order: penalties on the logits, then greedy or
// temperature, min_p, top_k, top_p. buf holds at least a vocabulary of floats.
func (d *dist) sampleFull(p samplerParams, seq []int32, nOut int, rng *rand.Rand, buf []float64) int32 {
	m := d.m
	V := len(m.base)
	logits := buf[:V]
	copy(logits, m.base)
	for _, b := range d.bs[:d.n] {
		logits[b.id] += b.b
	}
	if p.repetition != 1 {
		seen := make(map[int32]bool, len(seq))
		for _, id := range seq {
			if !seen[id] {
				seen[id] = true
				if logits[id] > 0 {
					logits[id] /= p.repetition
				} else {
					logits[id] *= p.repetition
				}
			}
		}
	}
	if p.presence != 0 || p.frequency != 0 {
		counts := map[int32]int{}
		for _, id := range seq[len(seq)-nOut:] {
			counts[id]++
		}
		for id, n := range counts {
			logits[id] -= p.frequency*float64(n) + p.presence
		}
	}
	ids := byLogit(logits)
	if p.temperature <= 0 {
		return ids[0]
	}
	maxL := logits[ids[0]]
	w := make([]float64, V)
	var total float64
	for i, v := range ids {
		w[i] = math.Exp((logits[v] - maxL) / p.temperature)
		total += w[i]
	}
	cut := V
	if p.minP > 0 {
		for cut > 1 && w[cut-1]/total < p.minP*w[0]/total {
			cut--
		}
	}
	if p.topK > 0 && p.topK < cut {
		cut = p.topK
	}
	var kept float64
	for i := range cut {
		kept += w[i]
	}
	if p.topP > 0 && p.topP < 1 {
		var cum float64
		for i := range cut {
			cum += w[i]
			if cum >= p.topP*kept {
				cut = i + 1
				break
			}
		}
		kept = cum
	}
	r := rng.Float64() * kept
	for i := range cut {
		r -= w[i]
		if r < 0 {
			return ids[i]
		}
	}
	return ids[cut-1]
}

// WithReasoningParser makes /v1/chat/completions split reasoning off the content as
// vLLM's qwen3 reasoning parser does: text that opens with <think> puts what follows
// it, up to </think>, in message.reasoning and the rest in content; without a closing
// </think> (a thinking model cut at max_tokens) all of it is reasoning and content is
// null. Like the newest vLLM, the field is named "reasoning" ("reasoning_content" in
// older releases). Without the option, reasoning is always null.
func WithReasoningParser() Option { return func(c *config) { c.reasoning = true } }

// splitReasoning splits "<think>R</think>C"; content is nil when C is empty.
func splitReasoning(text string) (reasoning string, content any, ok bool) {
	const open, end = "<think>", "</think>"
	rest, found := strings.CutPrefix(strings.TrimLeft(text, "\n"), open)
	if !found {
		return "", nil, false
	}
	r, c, closed := strings.Cut(rest, end)
	if !closed {
		return rest, nil, true
	}
	c = strings.TrimLeft(c, "\n")
	if c == "" {
		return r, nil, true
	}
	return r, c, true
}

// SamplingFields are the request fields that decide how /v1/completions and
// /v1/chat/completions sample: the generation-config keys, the two penalties the
// OpenAI protocol has, and max_tokens.
var SamplingFields = []string{"temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "max_tokens"}

// LeftToServer returns the [SamplingFields] that r, a generation request, did not
// state (absent or null), so that the server's defaults decided them; nil for other
// paths. Chat requests may state max_completion_tokens instead of max_tokens.
func LeftToServer(r Request) []string {
	if r.Path != "/v1/completions" && r.Path != "/v1/chat/completions" {
		return nil
	}
	var out []string
	for _, f := range SamplingFields {
		if v, ok := r.JSON[f]; ok && v != nil {
			continue
		}
		if f == "max_tokens" && r.Path == "/v1/chat/completions" && r.JSON["max_completion_tokens"] != nil {
			continue
		}
		out = append(out, f)
	}
	return out
}

func (s *Server) connState(_ net.Conn, st http.ConnState) {
	if st == http.StateNew {
		s.conns.Add(1)
	}
}

// Connections returns how many TCP connections the server has accepted since it
// started: a client that reuses its connections keeps it near its concurrency, one that
// churns makes it grow with every request.
func (s *Server) Connections() int { return int(s.conns.Load()) }

// Package sampling holds the parameters that decide how a model draws each token,
// and the rule this library keeps about them: every request states every one of them,
// so that nothing is left to a server's defaults.
//
// Why: vLLM's default --generation-config auto fills every sampling field a request
// leaves out from the model's generation_config.json (Qwen3 ships temperature 0.6,
// top_k 20, top_p 0.95). A client that sends only temperature and top_p then samples
// with the model's top_k, min_p and repetition_penalty, while the logprobs vLLM reports
// (raw by default, see --logprobs-mode) are those of the untruncated, unpenalised
// distribution. A trainer that takes them as the behaviour policy's logprobs computes
// wrong importance ratios, and nothing says so.
//
// [Params] is the full set; [Params.Resolved] gives the values sent on the wire (the
// zero value of every field but Temperature is "off"); [Params.Mismatches] names the
// settings under which the reported logprobs are not those of the distribution that
// was sampled.
package sampling

import (
	"errors"
	"fmt"
	"math"
)

// Params are the sampling parameters of one request. The zero value of every field
// except Temperature means "off": no truncation, no penalty. Temperature is used as
// given (0 is greedy); the configuration structs that hold Params say what their zero
// Temperature means.
type Params struct {
	// Temperature divides the logits; 0 is greedy decoding.
	Temperature float64
	// TopP keeps the smallest set of most likely tokens whose mass reaches TopP, in
	// (0, 1]; 0 means 1 (off).
	TopP float64
	// TopK keeps the K most likely tokens; 0 or -1 means off (sent as -1).
	TopK int
	// MinP drops tokens less likely than MinP times the most likely one, in [0, 1]; 0
	// is off.
	MinP float64
	// RepetitionPenalty divides positive logits (multiplies negative ones) of tokens
	// already in the prompt or the output; > 0, and 0 means 1 (off).
	RepetitionPenalty float64
	// PresencePenalty is subtracted from the logit of every token already generated, in
	// [-2, 2]; 0 is off.
	PresencePenalty float64
	// FrequencyPenalty is subtracted once per earlier occurrence in the output, in
	// [-2, 2]; 0 is off.
	FrequencyPenalty float64
}

// Neutral returns Params with temperature t and every other field off.
func Neutral(t float64) Params { return Params{Temperature: t}.Resolved() }

// Resolved returns p with the "off" zero values replaced by the values a server takes
// as off: TopP 1, TopK -1, RepetitionPenalty 1.
func (p Params) Resolved() Params {
	if p.TopP == 0 {
		p.TopP = 1
	}
	if p.TopK == 0 {
		p.TopK = -1
	}
	if p.RepetitionPenalty == 0 {
		p.RepetitionPenalty = 1
	}
	return p
}

// Validate reports the fields outside the ranges vLLM accepts, all of them.
func (p Params) Validate() error {
	var errs []error
	bad := func(name string, v any, want string) {
		errs = append(errs, fmt.Errorf("sampling: %s is %v; want %s", name, v, want))
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if !finite(p.Temperature) || p.Temperature < 0 {
		bad("Temperature", p.Temperature, "≥ 0 (0 is greedy)")
	}
	if !finite(p.TopP) || p.TopP < 0 || p.TopP > 1 {
		bad("TopP", p.TopP, "(0, 1], or 0 for off")
	}
	if p.TopK < -1 {
		bad("TopK", p.TopK, "≥ 1, or 0 or -1 for off")
	}
	if !finite(p.MinP) || p.MinP < 0 || p.MinP > 1 {
		bad("MinP", p.MinP, "[0, 1]")
	}
	if !finite(p.RepetitionPenalty) || p.RepetitionPenalty < 0 {
		bad("RepetitionPenalty", p.RepetitionPenalty, "> 0, or 0 for off")
	}
	if !finite(p.PresencePenalty) || p.PresencePenalty < -2 || p.PresencePenalty > 2 {
		bad("PresencePenalty", p.PresencePenalty, "[-2, 2]")
	}
	if !finite(p.FrequencyPenalty) || p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2 {
		bad("FrequencyPenalty", p.FrequencyPenalty, "[-2, 2]")
	}
	return errors.Join(errs...)
}

// Mismatches names, as "field value", each setting of p under which the logprobs a
// server reports for sampled tokens are not those of the distribution they were drawn
// from: a temperature other than 1, any truncation (top_p, top_k, min_p) and any
// penalty. vLLM's default --logprobs-mode raw_logprobs reports the model's
// distribution before all of them; processed_logprobs applies temperature and
// truncation but still differs from the full softmax a trainer computes. It is empty
// for Neutral(1).
func (p Params) Mismatches() []string {
	r := p.Resolved()
	var out []string
	if r.Temperature != 1 {
		out = append(out, fmt.Sprintf("temperature %g", r.Temperature))
	}
	if r.TopP != 1 {
		out = append(out, fmt.Sprintf("top_p %g", r.TopP))
	}
	if r.TopK > 0 {
		out = append(out, fmt.Sprintf("top_k %d", r.TopK))
	}
	if r.MinP != 0 {
		out = append(out, fmt.Sprintf("min_p %g", r.MinP))
	}
	if r.RepetitionPenalty != 1 {
		out = append(out, fmt.Sprintf("repetition_penalty %g", r.RepetitionPenalty))
	}
	if r.PresencePenalty != 0 {
		out = append(out, fmt.Sprintf("presence_penalty %g", r.PresencePenalty))
	}
	if r.FrequencyPenalty != 0 {
		out = append(out, fmt.Sprintf("frequency_penalty %g", r.FrequencyPenalty))
	}
	return out
}

// Map returns the resolved values under vLLM's request field names (temperature,
// top_p, top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty), as
// recorded in an Atropos group's generation_params.
func (p Params) Map() map[string]any {
	r := p.Resolved()
	return map[string]any{
		"temperature":        r.Temperature,
		"top_p":              r.TopP,
		"top_k":              r.TopK,
		"min_p":              r.MinP,
		"repetition_penalty": r.RepetitionPenalty,
		"presence_penalty":   r.PresencePenalty,
		"frequency_penalty":  r.FrequencyPenalty,
	}
}

// Fields are vLLM's names of the request fields [Params] sets, in a fixed order.
var Fields = []string{"temperature", "top_p", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"}

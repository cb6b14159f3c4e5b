package vllm

import (
	"fmt"

	"github.com/agentic-opd/agenticopd/sampling"
)

// SetSampling sets every sampling field of r from p, resolved (top_k -1 and
// repetition_penalty 1 when off), so that none is left to the server's
// --generation-config defaults.
func (r *CompletionRequest) SetSampling(p sampling.Params) {
	r.Temperature, r.TopP, r.TopK, r.MinP, r.RepetitionPenalty, r.PresencePenalty, r.FrequencyPenalty = samplingPtrs(p)
}

// SetSampling sets every sampling field of r from p, as [CompletionRequest.SetSampling].
func (r *ChatCompletionRequest) SetSampling(p sampling.Params) {
	r.Temperature, r.TopP, r.TopK, r.MinP, r.RepetitionPenalty, r.PresencePenalty, r.FrequencyPenalty = samplingPtrs(p)
}

func samplingPtrs(p sampling.Params) (temp, topP *float64, topK *int, minP, rep, pres, freq *float64) {
	r := p.Resolved()
	return new(r.Temperature), new(r.TopP), new(r.TopK), new(r.MinP), new(r.RepetitionPenalty), new(r.PresencePenalty), new(r.FrequencyPenalty)
}

// ScoreSampling returns what every teacher scoring request states: temperature 1 and
// every other sampling parameter off. prompt_logprobs are computed from the model's raw
// distribution whatever the sampling fields say (vLLM applies neither temperature nor
// truncation to them), so these values only decide the one token each scoring
// request generates and throws away; they are sent so that no server default applies.
func ScoreSampling() sampling.Params { return sampling.Neutral(1) }

func checkSampling(path string, p sampling.Params) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("vllm: POST %s: %w", path, err)
	}
	return nil
}

package rollout

// Further stop reasons, beside those declared with [StopReason].
const (
	// StopPromptMismatch: the server reported a prompt that differs from the ids sent,
	// so what it generated is not a continuation of the held tokens. The turn's output
	// is discarded.
	StopPromptMismatch StopReason = "prompt_mismatch"
)

// Stats counts the boundary events of §4.6 of the tokenization reference over one or
// more rollouts. Each field has a metric name, reported by [Stats.Metrics].
type Stats struct {
	// Rollouts is the number of rollouts counted ("rollout/rollouts").
	Rollouts int
	// TemplateDrift counts deltas that failed their prefix or shape check
	// ("rollout/template_drift"); each ends its episode with StopTemplateDrift.
	TemplateDrift int
	// PromptEchoMismatch counts generations whose echoed prompt differed from the ids
	// sent ("rollout/prompt_echo_mismatch").
	PromptEchoMismatch int
	// AltClose counts turns that stopped on an id other than the template's close
	// ("rollout/alt_close").
	AltClose int
	// SynthClose counts close tokens the agent added after a truncated turn
	// ("rollout/synth_close").
	SynthClose int
	// TruncatedTurns counts turns cut at max_tokens ("rollout/truncated_turns").
	TruncatedTurns int
	// InvalidToolCalls counts tool calls that could not be parsed
	// ("rollout/invalid_tool_calls").
	InvalidToolCalls int
	// UnknownToolCalls counts calls of tools that do not exist
	// ("rollout/unknown_tool_calls").
	UnknownToolCalls int
	// ToolCalls counts every tool call, valid or not ("rollout/tool_calls").
	ToolCalls int
}

// Add returns the field-wise sum of s and o.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Rollouts:           s.Rollouts + o.Rollouts,
		TemplateDrift:      s.TemplateDrift + o.TemplateDrift,
		PromptEchoMismatch: s.PromptEchoMismatch + o.PromptEchoMismatch,
		AltClose:           s.AltClose + o.AltClose,
		SynthClose:         s.SynthClose + o.SynthClose,
		TruncatedTurns:     s.TruncatedTurns + o.TruncatedTurns,
		InvalidToolCalls:   s.InvalidToolCalls + o.InvalidToolCalls,
		UnknownToolCalls:   s.UnknownToolCalls + o.UnknownToolCalls,
		ToolCalls:          s.ToolCalls + o.ToolCalls,
	}
}

// Metrics returns the counters under their metric names, for example
// "rollout/template_drift".
func (s Stats) Metrics() map[string]float64 {
	return map[string]float64{
		"rollout/rollouts":             float64(s.Rollouts),
		"rollout/template_drift":       float64(s.TemplateDrift),
		"rollout/prompt_echo_mismatch": float64(s.PromptEchoMismatch),
		"rollout/alt_close":            float64(s.AltClose),
		"rollout/synth_close":          float64(s.SynthClose),
		"rollout/truncated_turns":      float64(s.TruncatedTurns),
		"rollout/invalid_tool_calls":   float64(s.InvalidToolCalls),
		"rollout/unknown_tool_calls":   float64(s.UnknownToolCalls),
		"rollout/tool_calls":           float64(s.ToolCalls),
	}
}

package rollout

import "github.com/agentic-opd/agenticopd/chat"

// SegmentKind says where a run of token ids came from.
type SegmentKind uint8

// Segment kinds. Only SegSampled tokens were produced by the policy; they alone carry
// sampling logprobs and are trained on.
const (
	// SegPrompt is the first rendering of the conversation, without the generation prompt.
	SegPrompt SegmentKind = iota + 1
	// SegGenPrompt is the generation prompt before a sampled turn (for ChatML,
	// "<|im_start|>assistant\n"). A hint for the turn is inserted right before it.
	SegGenPrompt
	// SegSampled is a generated turn, verbatim, including the end-of-turn token the model
	// generated.
	SegSampled
	// SegCloseSynth is an end-of-turn token the library added after a turn cut at
	// max_tokens.
	SegCloseSynth
	// SegSeparator is template text owed after an end-of-turn token (ChatML's "\n").
	SegSeparator
	// SegDelta is the template's rendering of appended messages (tool results, user turns).
	SegDelta
	// SegHint is a hint inserted for the teacher; it never appears in a student trajectory.
	SegHint
)

// Segment is a run [Start, End) of Trajectory.Tokens of one kind.
type Segment struct {
	Kind       SegmentKind // what the tokens are
	Start, End int         // token indexes, End exclusive
	// Message is the index in Trajectory.Messages of the message the segment belongs
	// to, or -1 (the prompt spans several messages; a generation prompt belongs to the
	// assistant message it opens).
	Message int
}

// Turn is one assistant turn as generated.
type Turn struct {
	// Message is the index of the assistant message in Trajectory.Messages.
	Message int
	// GenPromptStart is the start of the generation prompt that opened this turn: the
	// place an inline hint is inserted.
	GenPromptStart int
	// Start and End bound the sampled ids [Start, End): text, tool-call text and the
	// end-of-turn token the model generated.
	Start, End int
	// Truncated reports a turn cut at max_tokens (no end-of-turn token was sampled).
	Truncated bool
	// InvalidCalls are the indices, in the assistant message's ToolCalls, of the calls
	// the parser could not read: their Arguments hold the text between the call's tags
	// as the model wrote it, which is not JSON a chat template can render.
	InvalidCalls []int
}

// Trajectory is the token-exact record of one rollout.
type Trajectory struct {
	// Tokens are the exact ids the policy saw and produced, in order.
	Tokens []int32
	// Logprobs is parallel to Tokens: the sampling logprob at SegSampled positions, 0
	// elsewhere.
	Logprobs []float32
	Segments []Segment // runs of Tokens by kind, in order
	Turns    []Turn    // the assistant turns, in order
	// Messages is the OpenAI-format conversation, for the judge, the reward and
	// Atropos's "messages"; never used to derive ids.
	Messages []chat.Message
	// TurnsUsed counts policy calls, including a final turn without tool calls and a
	// call that failed.
	TurnsUsed int
	// Stop says why the loop ended.
	Stop StopReason
	// Err describes the policy error when Stop is StopPolicyError.
	Err string
}

// StopReason says why an agent loop ended.
type StopReason string

// Stop reasons.
const (
	StopNoToolCalls   StopReason = "no_tool_calls"  // the model answered without calling a tool
	StopMaxTurns      StopReason = "max_turns"      // the turn budget ran out
	StopContextLength StopReason = "context_length" // the next turn would not fit the model's context
	StopTruncated     StopReason = "truncated"      // a turn was cut at max_tokens
	StopPolicyError   StopReason = "policy_error"   // the policy failed; see Err
	StopTemplateDrift StopReason = "template_drift" // a delta could not be appended exactly
	StopCanceled      StopReason = "canceled"       // ctx ended
)

// MaskIgnore is Atropos's mask value for positions that are not trained on.
const MaskIgnore = -100

// AtroposTokens returns Tokens as Atropos's "tokens".
func (t *Trajectory) AtroposTokens() []int {
	out := make([]int, len(t.Tokens))
	for i, id := range t.Tokens {
		out[i] = int(id)
	}
	return out
}

// Masks returns Atropos's "masks": the token id at sampled positions, MaskIgnore
// elsewhere.
func (t *Trajectory) Masks() []int {
	out := make([]int, len(t.Tokens))
	for i := range out {
		out[i] = MaskIgnore
	}
	for _, s := range t.Segments {
		if s.Kind != SegSampled {
			continue
		}
		for i := s.Start; i < s.End; i++ {
			out[i] = int(t.Tokens[i])
		}
	}
	return out
}

// InferenceLogprobs returns Atropos's "inference_logprobs": the sampling logprob at
// sampled positions and 1.0 (Atropos's sentinel) elsewhere.
func (t *Trajectory) InferenceLogprobs() []float64 {
	out := make([]float64, len(t.Tokens))
	for i := range out {
		out[i] = 1.0
	}
	for _, s := range t.Segments {
		if s.Kind != SegSampled {
			continue
		}
		for i := s.Start; i < s.End; i++ {
			out[i] = float64(t.Logprobs[i])
		}
	}
	return out
}

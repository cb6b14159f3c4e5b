package reward

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/agentic-opd/agenticopd/chat"
)

// Input is what a [Reward] scores: a finished rollout and its verification.
type Input struct {
	// Messages is the rollout's OpenAI-format conversation; the tool calls of its
	// assistant messages decide the tool-usage part.
	Messages []chat.Message
	// TurnsUsed counts the policy calls of the rollout.
	TurnsUsed int
	// MaxTurns is the rollout's turn budget (the agent's max_turns); it must be positive.
	MaxTurns int
	// Verification is the result of [Verify].
	Verification Verification
}

// Breakdown is a reward and its parts, kept for metrics.
type Breakdown struct {
	// Reward is the final score.
	Reward float64
	// Correctness is C, from the verification.
	Correctness float64
	// Efficiency is E, from the turns used.
	Efficiency float64
	// ToolUsage is U, from the tools called.
	ToolUsage float64
}

// Reward scores finished rollouts. Implementations must be safe for concurrent use and
// must return finite values.
type Reward interface {
	// Score returns the reward of one finished rollout and its parts.
	Score(ctx context.Context, in Input) (Breakdown, error)
}

// Func adapts a function to a [Reward].
type Func func(ctx context.Context, in Input) (Breakdown, error)

// Score calls f(ctx, in).
func (f Func) Score(ctx context.Context, in Input) (Breakdown, error) { return f(ctx, in) }

// Weights are the weights of the three parts of [Default].
type Weights struct {
	// Correctness weighs C.
	Correctness float64
	// Efficiency weighs E.
	Efficiency float64
	// ToolUsage weighs U.
	ToolUsage float64
}

// DefaultWeights are the original environment's weights.
var DefaultWeights = Weights{Correctness: 0.7, Efficiency: 0.15, ToolUsage: 0.15}

// ErrInvalidInput is wrapped by the errors [Default] returns for unusable input or
// weights.
var ErrInvalidInput = errors.New("reward: invalid input")

// Default is the original environment's reward:
// clamp(w_C·C + w_E·E + w_U·U, 0, 1) with C from the verification, E = [Efficiency] and
// U = [ToolUsage]. A rollout that used no turn scores 0 in every part, as in the
// original. The zero value uses DefaultWeights; a Default is safe for concurrent use.
type Default struct {
	// Weights are the weights; the zero value means DefaultWeights. Each must be finite.
	Weights Weights
}

// Score implements [Reward].
func (d Default) Score(_ context.Context, in Input) (Breakdown, error) {
	w := d.Weights
	if w == (Weights{}) {
		w = DefaultWeights
	}
	for _, x := range []float64{w.Correctness, w.Efficiency, w.ToolUsage} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Breakdown{}, fmt.Errorf("%w: weights %+v are not all finite", ErrInvalidInput, w)
		}
	}
	if in.MaxTurns <= 0 {
		return Breakdown{}, fmt.Errorf("%w: MaxTurns is %d; set it to the agent's max_turns", ErrInvalidInput, in.MaxTurns)
	}
	if c := in.Verification.Correctness; math.IsNaN(c) || c < 0 || c > 1 {
		return Breakdown{}, fmt.Errorf("%w: correctness %v is outside [0, 1]", ErrInvalidInput, c)
	}
	if in.TurnsUsed <= 0 {
		return Breakdown{}, nil
	}
	b := Breakdown{
		Correctness: in.Verification.Correctness,
		Efficiency:  Efficiency(in.TurnsUsed, in.MaxTurns),
		ToolUsage:   ToolUsage(in.Messages),
	}
	r := w.Correctness*b.Correctness + w.Efficiency*b.Efficiency + w.ToolUsage*b.ToolUsage
	b.Reward = min(max(r, 0), 1)
	return b, nil
}

// Efficiency is E for a rollout that used turns of a budget of maxTurns, with the
// original's bands (integer division):
//
//	turns ≤ 3               1.0
//	turns ≤ maxTurns/2      0.8
//	turns ≤ (maxTurns·3)/4  0.5
//	otherwise               0.2
//
// For maxTurns 15 the bands are 1–3, 4–7, 8–11 and 12–15. For small budgets bands
// collapse as in the original: with maxTurns 4, turn 4 gets 0.2.
func Efficiency(turns, maxTurns int) float64 {
	switch {
	case turns <= 3:
		return 1.0
	case turns <= maxTurns/2:
		return 0.8
	case turns <= maxTurns*3/4:
		return 0.5
	default:
		return 0.2
	}
}

// Tool names that [ToolUsage] looks for.
const (
	ToolTerminal  = "terminal"   // runs a shell command
	ToolWriteFile = "write_file" // writes a file
	ToolPatch     = "patch"      // replaces text in a file
)

// ToolUsage is U, from the set of function names called by the assistant messages of
// msgs (unknown names included, as in the original). A tool call counts only when its
// name is not empty or blank: an unparsable <tool_call> block, recorded with an empty
// name, and a call named " " are calls to no tool, and a call to no tool is not tool
// use. This differs from the original, which counted any name, so that a call named
// " " earned 0.3 there and earns nothing here.
//
//	terminal and (write_file or patch)   1.0
//	terminal                             0.6
//	any other tool                       0.3
//	no tool call                         0.0
func ToolUsage(msgs []chat.Message) float64 {
	var terminal, edit, called bool
	for _, m := range msgs {
		if m.Role != chat.RoleAssistant {
			continue
		}
		for _, tc := range m.ToolCalls {
			if strings.TrimSpace(tc.Function.Name) == "" {
				continue
			}
			called = true
			switch tc.Function.Name {
			case ToolTerminal:
				terminal = true
			case ToolWriteFile, ToolPatch:
				edit = true
			}
		}
	}
	switch {
	case terminal && edit:
		return 1.0
	case terminal:
		return 0.6
	case called:
		return 0.3
	default:
		return 0
	}
}

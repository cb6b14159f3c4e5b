package reward_test

import (
	"context"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
)

func TestEfficiency(t *testing.T) {
	tests := []struct {
		name     string
		maxTurns int
		// want[i] is E for turns i+1.
		want []float64
	}{
		{name: "max 15", maxTurns: 15, want: []float64{
			1, 1, 1, // 1–3
			0.8, 0.8, 0.8, 0.8, // 4–7 (15/2 = 7)
			0.5, 0.5, 0.5, 0.5, // 8–11 (45/4 = 11)
			0.2, 0.2, 0.2, 0.2, // 12–15
		}},
		{name: "max 4 collapses", maxTurns: 4, want: []float64{1, 1, 1, 0.2}},
		{name: "max 8", maxTurns: 8, want: []float64{1, 1, 1, 0.8, 0.5, 0.5, 0.2, 0.2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []float64
			for turns := 1; turns <= tc.maxTurns; turns++ {
				got = append(got, reward.Efficiency(turns, tc.maxTurns))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("E by turn (-want +got):\n%s", diff)
			}
		})
	}
	// The base default of 30 turns: cutoffs 3 / 15 / 22.
	for turns, want := range map[int]float64{3: 1, 4: 0.8, 15: 0.8, 16: 0.5, 22: 0.5, 23: 0.2, 30: 0.2} {
		require.Equal(t, want, reward.Efficiency(turns, 30), "turns %d of 30", turns)
	}
}

func calls(names ...string) chat.Message {
	m := chat.Message{Role: chat.RoleAssistant}
	for _, n := range names {
		m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: "c", Type: "function", Function: chat.FunctionCall{Name: n, Arguments: "{}"}})
	}
	return m
}

// parsedCalls is the assistant message the Hermes parser makes of a generated text.
func parsedCalls(text string) chat.Message {
	m := chat.Message{Role: chat.RoleAssistant}
	for _, c := range (rollout.Hermes{}).Parse(text).Calls {
		m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: "c", Type: "function", Function: chat.FunctionCall{Name: c.Name, Arguments: "{}"}})
	}
	return m
}

func TestToolUsage(t *testing.T) {
	tests := []struct {
		name string
		msgs []chat.Message
		want float64
	}{
		{name: "terminal and write_file", msgs: []chat.Message{calls("write_file"), calls("terminal")}, want: 1},
		{name: "terminal and patch in one turn", msgs: []chat.Message{calls("patch", "terminal")}, want: 1},
		{name: "terminal only", msgs: []chat.Message{calls("terminal"), calls("read_file")}, want: 0.6},
		{name: "write_file only", msgs: []chat.Message{calls("write_file")}, want: 0.3},
		{name: "read and search", msgs: []chat.Message{calls("read_file", "search_files")}, want: 0.3},
		{name: "unknown tool", msgs: []chat.Message{calls("browser")}, want: 0.3},
		{name: "no tool calls", msgs: []chat.Message{{Role: chat.RoleAssistant, Content: "done"}}, want: 0},
		{name: "empty", want: 0},
		{name: "an unparsable tool call names no tool", msgs: []chat.Message{calls("")}, want: 0},
		{name: "a blank name is no tool either", msgs: []chat.Message{calls(" \t")}, want: 0},
		{name: "an unparsable call beside a real one", msgs: []chat.Message{calls("", "terminal")}, want: 0.6},
		{name: "the parser's output for a broken block", msgs: []chat.Message{parsedCalls("<tool_call>\n{not json\n</tool_call>")}, want: 0},
		{name: "tool calls outside assistant messages are ignored", msgs: []chat.Message{
			{Role: chat.RoleUser, ToolCalls: calls("terminal").ToolCalls},
		}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, reward.ToolUsage(tc.msgs))
		})
	}
}

func TestDefaultWorkedValues(t *testing.T) {
	full := []chat.Message{
		{Role: chat.RoleSystem, Content: "s"}, {Role: chat.RoleUser, Content: "u"},
		calls("write_file"), {Role: chat.RoleTool, Content: "{}"},
		calls("terminal"), {Role: chat.RoleTool, Content: "{}"},
		{Role: chat.RoleAssistant, Content: "done"},
	}
	c := func(exit int, out string) reward.Verification {
		v, rule := reward.Correctness(exit, out)
		return reward.Verification{Correctness: v, Rule: rule, ExitCode: exit}
	}
	tests := []struct {
		name string
		in   reward.Input
		want reward.Breakdown
	}{
		{
			name: "pass, 3 turns, terminal and write_file",
			in:   reward.Input{Messages: full, TurnsUsed: 3, MaxTurns: 15, Verification: c(0, "All tests passed!")},
			want: reward.Breakdown{Reward: 1.0, Correctness: 1, Efficiency: 1, ToolUsage: 1},
		},
		{
			name: "exit 0 without passed, 7 turns",
			in:   reward.Input{Messages: full, TurnsUsed: 7, MaxTurns: 15, Verification: c(0, "ok")},
			want: reward.Breakdown{Reward: 0.83, Correctness: 0.8, Efficiency: 0.8, ToolUsage: 1},
		},
		{
			name: "AssertionError, 11 turns",
			in:   reward.Input{Messages: full, TurnsUsed: 11, MaxTurns: 15, Verification: c(1, "AssertionError")},
			want: reward.Breakdown{Reward: 0.365, Correctness: 0.2, Efficiency: 0.5, ToolUsage: 1},
		},
		{
			name: "NameError, 12 turns",
			in:   reward.Input{Messages: full, TurnsUsed: 12, MaxTurns: 15, Verification: c(1, "NameError: name 'x' is not defined")},
			want: reward.Breakdown{Reward: 0.25, Correctness: 0.1, Efficiency: 0.2, ToolUsage: 1},
		},
		{
			name: "lowest possible: sandbox error, 15 turns, no tools",
			in:   reward.Input{TurnsUsed: 15, MaxTurns: 15, Verification: reward.Verification{Rule: reward.RuleSandboxError}},
			want: reward.Breakdown{Reward: 0.03, Correctness: 0, Efficiency: 0.2, ToolUsage: 0},
		},
		{
			name: "M=4 collapse: the fourth turn gets 0.2",
			in:   reward.Input{Messages: full, TurnsUsed: 4, MaxTurns: 4, Verification: c(0, "passed")},
			want: reward.Breakdown{Reward: 0.7 + 0.15*0.2 + 0.15, Correctness: 1, Efficiency: 0.2, ToolUsage: 1},
		},
		{
			name: "no turn used scores nothing",
			in:   reward.Input{TurnsUsed: 0, MaxTurns: 15, Verification: c(0, "passed")},
			want: reward.Breakdown{},
		},
	}
	approx := cmpopts.EquateApprox(0, 1e-12)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reward.Default{}.Score(context.Background(), tc.in)
			require.NoError(t, err)
			if diff := cmp.Diff(tc.want, got, approx); diff != "" {
				t.Errorf("breakdown (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultWeightsAndClamp(t *testing.T) {
	in := reward.Input{Messages: []chat.Message{calls("terminal")}, TurnsUsed: 5, MaxTurns: 15,
		Verification: reward.Verification{Correctness: 0.8}}
	tests := []struct {
		name    string
		weights reward.Weights
		want    float64
	}{
		{name: "zero value means the defaults", want: 0.7*0.8 + 0.15*0.8 + 0.15*0.6},
		{name: "correctness only", weights: reward.Weights{Correctness: 1}, want: 0.8},
		{name: "custom", weights: reward.Weights{Correctness: 0.5, Efficiency: 0.25, ToolUsage: 0.25}, want: 0.4 + 0.2 + 0.15},
		{name: "clamped to 1", weights: reward.Weights{Correctness: 2, Efficiency: 2, ToolUsage: 2}, want: 1},
		{name: "clamped to 0", weights: reward.Weights{Correctness: -1}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reward.Default{Weights: tc.weights}.Score(context.Background(), in)
			require.NoError(t, err)
			require.InDelta(t, tc.want, got.Reward, 1e-12)
			require.Equal(t, reward.Breakdown{Reward: got.Reward, Correctness: 0.8, Efficiency: 0.8, ToolUsage: 0.6}, got)
		})
	}
}

func TestDefaultRejectsBadInput(t *testing.T) {
	ok := reward.Input{TurnsUsed: 1, MaxTurns: 15}
	tests := []struct {
		name    string
		weights reward.Weights
		in      reward.Input
		want    string
	}{
		{name: "NaN weight", weights: reward.Weights{Correctness: math.NaN()}, in: ok, want: "not all finite"},
		{name: "infinite weight", weights: reward.Weights{ToolUsage: math.Inf(1)}, in: ok, want: "not all finite"},
		{name: "no max turns", in: reward.Input{TurnsUsed: 1}, want: "MaxTurns is 0"},
		{name: "correctness above 1", in: reward.Input{TurnsUsed: 1, MaxTurns: 15, Verification: reward.Verification{Correctness: 2}}, want: "outside [0, 1]"},
		{name: "NaN correctness", in: reward.Input{TurnsUsed: 1, MaxTurns: 15, Verification: reward.Verification{Correctness: math.NaN()}}, want: "outside [0, 1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reward.Default{Weights: tc.weights}.Score(context.Background(), tc.in)
			require.ErrorIs(t, err, reward.ErrInvalidInput)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestFunc(t *testing.T) {
	var r reward.Reward = reward.Func(func(_ context.Context, in reward.Input) (reward.Breakdown, error) {
		return reward.Breakdown{Reward: float64(in.TurnsUsed)}, nil
	})
	got, err := r.Score(context.Background(), reward.Input{TurnsUsed: 1})
	require.NoError(t, err)
	require.Equal(t, 1.0, got.Reward)
}

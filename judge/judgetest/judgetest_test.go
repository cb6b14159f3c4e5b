package judgetest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/judge/judgetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const hint = "Check the empty input before writing the loop."

func good(ctx context.Context, _ judge.Turn) (judge.Hint, error) {
	if err := ctx.Err(); err != nil {
		return judge.Hint{}, err
	}
	return judge.Hint{Text: hint, Votes: []judge.Vote{{Score: -1}, {Score: 1, Hint: hint}}}, nil
}

func TestTestJudgeAcceptsAGoodJudge(t *testing.T) {
	require.NoError(t, judgetest.TestJudge(judge.Func(good)))
}

func TestTestJudgeFindsViolations(t *testing.T) {
	tests := []struct {
		name  string
		judge judge.Judge
		want  []string // substrings of the joined error
	}{
		{
			name: "ignores ctx",
			judge: judge.Func(func(_ context.Context, turn judge.Turn) (judge.Hint, error) {
				return good(context.Background(), turn)
			}),
			want: []string{"CancelledContext:", "ExpiredDeadline:"},
		},
		{
			name: "hint without a positive vote",
			judge: judge.Func(func(ctx context.Context, _ judge.Turn) (judge.Hint, error) {
				return judge.Hint{Text: hint, Votes: []judge.Vote{{Score: -1, Hint: hint}}}, ctx.Err()
			}),
			want: []string{"WellFormed:", "Concurrent:", "is not the hint of a vote with score 1"},
		},
		{
			name: "bad votes",
			judge: judge.Func(func(ctx context.Context, _ judge.Turn) (judge.Hint, error) {
				return judge.Hint{Text: " x", Votes: []judge.Vote{{Score: 2}, {Score: 0}, {Score: 1, Unparsed: "why", Hint: " x"}}}, ctx.Err()
			}),
			want: []string{"score 2, want", "score 0 without an Unparsed reason", `Unparsed reason "why"`, "surrounding white space"},
		},
		{
			name: "errors without cause",
			judge: judge.Func(func(ctx context.Context, _ judge.Turn) (judge.Hint, error) {
				return judge.Hint{}, context.Canceled
			}),
			want: []string{"WellFormed:", "TurnUnchanged:", "Judge returned error"},
		},
		{
			name: "modifies the turn",
			judge: judge.Func(func(ctx context.Context, turn judge.Turn) (judge.Hint, error) {
				if len(turn.Context) > 0 {
					turn.Context[0].Content = strings.ToUpper(turn.Context[0].Content)
				}
				return judge.Hint{}, ctx.Err()
			}),
			want: []string{"TurnUnchanged:", "modified the turn"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := judgetest.TestJudge(tt.judge)
			require.Error(t, err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestRunPassesAGoodJudge(t *testing.T) {
	judgetest.Run(t, func() judge.Judge { return judge.Func(good) })
}

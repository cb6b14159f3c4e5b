package opd_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/opd"
)

// rows: 5 positions; 1 has three entries, 3 has one, the rest none.
func sampleRows() opd.Rows {
	return opd.Rows{
		Offsets:       []int32{0, 0, 3, 3, 4, 4},
		IDs:           []int32{11, 12, 13, 21},
		Logprobs:      []float32{-0.1, -2, -3, -0.5},
		TokenLogprobs: []float32{0, -0.1, 0, -7, 0},
	}
}

func TestRowsAccessors(t *testing.T) {
	r := sampleRows()
	require.Equal(t, 5, r.Len())
	require.Equal(t, 2, r.ScoredPositions())
	ids, lps := r.Row(1)
	require.Equal(t, []int32{11, 12, 13}, ids)
	require.Equal(t, []float32{-0.1, -2, -3}, lps)
	require.False(t, r.Scored(0))
	require.True(t, r.Scored(3))
	var zero opd.Rows
	require.Equal(t, 0, zero.Len())
}

func TestRowsDense(t *testing.T) {
	r := sampleRows()
	ids, lps := r.Dense()
	wantIDs := [][]int32{{}, {11, 12, 13}, {}, {21}, {}}
	wantLps := [][]float32{{}, {-0.1, -2, -3}, {}, {-0.5}, {}}
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLps, lps); diff != "" {
		t.Errorf("logprobs (-want +got):\n%s", diff)
	}
	b, err := json.Marshal(ids)
	require.NoError(t, err)
	require.JSONEq(t, `[[],[11,12,13],[],[21],[]]`, string(b), "unscored positions are [] on the wire, never null")

	ids[1][0] = 99
	got, _ := r.Row(1)
	require.Equal(t, int32(11), got[0], "Dense returns copies")
}

func TestRowsZeroPadded(t *testing.T) {
	r := sampleRows()
	ids, lps := r.ZeroPadded(2)
	wantIDs := [][]int32{{0, 0}, {11, 12}, {0, 0}, {21, 0}, {0, 0}}
	wantLps := [][]float32{{0, 0}, {-0.1, -2}, {0, 0}, {-0.5, 0}, {0, 0}}
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantLps, lps); diff != "" {
		t.Errorf("logprobs (-want +got):\n%s", diff)
	}
	ids[0] = append(ids[0], 5)
	require.Equal(t, []int32{11, 12}, ids[1], "rows do not share capacity")

	require.PanicsWithValue(t, "opd: Rows.ZeroPadded: k is -1, want ≥ 0", func() { r.ZeroPadded(-1) })
}

func TestMetricsMapAndAdd(t *testing.T) {
	m := opd.Metrics{Rollouts: 2, RolloutsWithHint: 1, Hints: 3, ScoredTurns: 2, Pairs: 7,
		Votes: 21, UnparsedVotes: 2, UnparsedByReason: map[string]int{"no_decision": 2}}
	var sum opd.Metrics
	sum.Add(m)
	sum.Add(opd.Metrics{Rollouts: 2, Hints: 1, ScoredTurns: 0, TeacherRequests: 1, UnparsedByReason: map[string]int{"request_failed": 3}})
	got := sum.Map()
	for name, want := range map[string]float64{
		"opd/mean_hints_per_rollout":          1,
		"opd/mean_turns_scored":               0.5,
		"opd/hint_rate":                       0.25,
		"opd/total_hints":                     4,
		"opd/total_scored_turns":              2,
		"opd/turn_pairs":                      7,
		"opd/judge_votes":                     21,
		"opd/unparsable_votes":                2,
		"opd/unparsable_votes/no_decision":    2,
		"opd/unparsable_votes/request_failed": 3,
		"opd/teacher_requests":                1,
	} {
		require.Equal(t, want, got[name], name)
	}
	require.Equal(t, 2, m.UnparsedByReason["no_decision"], "Add does not alias its argument's map")
}

package sampling_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/sampling"
)

func TestResolvedStatesOff(t *testing.T) {
	require.Equal(t, sampling.Params{Temperature: 1, TopP: 1, TopK: -1, RepetitionPenalty: 1}, sampling.Params{Temperature: 1}.Resolved())
	require.Equal(t, sampling.Neutral(1), sampling.Neutral(1).Resolved(), "idempotent")
	require.Len(t, sampling.Neutral(1).Map(), len(sampling.Fields))
}

func TestMismatches(t *testing.T) {
	require.Empty(t, sampling.Neutral(1).Mismatches())
	require.Empty(t, sampling.Params{Temperature: 1, TopK: -1, TopP: 1}.Mismatches())
	got := sampling.Params{Temperature: 0.6, TopP: 0.95, TopK: 20, MinP: 0.1, RepetitionPenalty: 1.05, PresencePenalty: 1, FrequencyPenalty: -1}.Mismatches()
	require.Equal(t, []string{"temperature 0.6", "top_p 0.95", "top_k 20", "min_p 0.1", "repetition_penalty 1.05", "presence_penalty 1", "frequency_penalty -1"}, got)
}

func TestValidate(t *testing.T) {
	require.NoError(t, sampling.Params{}.Validate())
	require.NoError(t, sampling.Params{Temperature: 2, TopP: 0.5, TopK: 5, MinP: 1, RepetitionPenalty: 2, PresencePenalty: -2, FrequencyPenalty: 2}.Validate())
	err := sampling.Params{Temperature: -1, TopP: 2, TopK: -2, MinP: -0.1, RepetitionPenalty: -1, PresencePenalty: 3, FrequencyPenalty: -3}.Validate()
	for _, f := range []string{"Temperature", "TopP", "TopK", "MinP", "RepetitionPenalty", "PresencePenalty", "FrequencyPenalty"} {
		require.ErrorContains(t, err, f+" is")
	}
}

package atropos_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
)

func TestValidateAcceptsGoodGroups(t *testing.T) {
	require.NoError(t, goldenGroup(t).Validate(atropos.ValidateOptions{MaxTokenLen: 5, GroupSize: 2, RequireInferenceLogprobs: true}))
	g := goldenGroup(t)
	g.GroupOverrides = nil
	g.Tokens, g.Masks, g.Scores = g.Tokens[:1], g.Masks[:1], g.Scores[:1]
	g.Advantages, g.RefLogprobs, g.InferenceLogprobs = g.Advantages[:1], g.RefLogprobs[:1], g.InferenceLogprobs[:1]
	g.Messages, g.Overrides, g.Distill = g.Messages[:1], g.Overrides[:1], g.Distill[:1]
	require.NoError(t, g.Validate(atropos.ValidateOptions{}), "one sequence is a power of two")
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		opts atropos.ValidateOptions
		mod  func(g *atropos.ScoredDataGroup)
		want string
	}{
		{"no sequences", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { *g = atropos.ScoredDataGroup{} }, "tokens: no sequences"},
		{"masks count", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Masks = g.Masks[:1] }, "masks: 1 entries for 2 sequences"},
		{"scores count", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Scores = append(g.Scores, 1) }, "scores: 3 scores for 2 sequences"},
		{"masks length", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Masks[1] = g.Masks[1][:3] }, "masks[1]: 3 masks for 4 tokens"},
		{"mask value", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Masks[0][3] = 99 }, "masks[0][3]: 99, want -100 (not trained) or the token id 12"},
		{"negative token", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Tokens[0][0] = -1 }, "tokens[0][0]: negative token id"},
		{"empty sequence", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Tokens[0], g.Masks[0] = []int{}, []int{} }, "tokens[0]: empty sequence"},
		{"too long", atropos.ValidateOptions{MaxTokenLen: 4}, func(*atropos.ScoredDataGroup) {}, "tokens[0]: 4 tokens, the trainer's max_token_len is 4"},
		{"group size", atropos.ValidateOptions{GroupSize: 4}, func(g *atropos.ScoredDataGroup) { g.GroupOverrides = nil }, "2 sequences, the group size is 4"},
		{"group size override", atropos.ValidateOptions{GroupSize: 2}, func(g *atropos.ScoredDataGroup) { g.GroupOverrides["group_size"] = 4.0 }, "the group size is 4"},
		{"bad override", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.GroupOverrides["group_size"] = "two" }, "group_size two is not a positive integer"},
		{"not a power of two", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) {
			var three atropos.ScoredDataGroup
			for range 3 {
				require.NoError(t, three.Add(atropos.Sequence{Tokens: []int{1}, Masks: []int{1}}))
			}
			*g = three
		}, "3 sequences is not a power of two"},
		{"NaN score", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Scores[1] = math.NaN() }, "scores[1]: NaN is not a finite number"},
		{"Inf advantage", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Advantages[0][1] = math.Inf(1) }, "advantages[0][1]: +Inf"},
		{"ref_logprobs length", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.RefLogprobs[1] = g.RefLogprobs[1][:2] }, "ref_logprobs[1]: 2 values for 4 tokens"},
		{"inference_logprobs count", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.InferenceLogprobs = g.InferenceLogprobs[:1] }, "inference_logprobs: 1 entries for 2 sequences"},
		{"missing inference_logprobs", atropos.ValidateOptions{RequireInferenceLogprobs: true}, func(g *atropos.ScoredDataGroup) { g.InferenceLogprobs = nil }, "inference_logprobs: missing"},
		{"sentinel at masked", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.InferenceLogprobs[0][0] = -0.5 }, "inference_logprobs[0][0]: -0.5 at a masked position, want 1"},
		{"positive at trained", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.InferenceLogprobs[0][2] = 1 }, "inference_logprobs[0][2]: 1 at a trained position"},
		{"distill rows", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Distill[1] = atropos.NewDistillRows(3) }, "distill_token_ids[1]: 3 rows for 4 tokens"},
		{"distill count", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Distill = g.Distill[:1] }, "distill_token_ids: 1 entries for 2 sequences"},
		{"distill nil", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Distill[0] = nil }, "distill_token_ids[0]: nil rows"},
		{"distill negative id", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) {
			require.NoError(t, g.Distill[0].SetRow(1, []int32{-3}, []float32{-1}))
		}, "distill_token_ids[0][1]: negative token id -3"},
		{"distill NaN", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) {
			require.NoError(t, g.Distill[0].SetRow(1, []int32{3}, []float32{float32(math.Inf(-1))}))
		}, "distill_logprobs[0][1]: -Inf"},
		{"message without content", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) {
			g.Messages[1][0] = json.RawMessage(`{"role":"user"}`)
		}, `messages[1][0]: message has no "content"`},
		{"message without role", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) {
			g.Messages[0][1] = json.RawMessage(`{"content":"x"}`)
		}, `messages[0][1]: message has no "role"`},
		{"messages count", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Messages = g.Messages[:1] }, "messages: 1 entries for 2 sequences"},
		{"null overrides entry", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Overrides[0] = nil }, "overrides[0]: null"},
		{"overrides count", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Overrides = g.Overrides[:1] }, "overrides: 1 entries for 2 sequences"},
		{"NaN in overrides", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Overrides[1]["temperature"] = math.NaN() }, `overrides[1]: "temperature": atropos: NaN or Inf value`},
		{"NaN in generation_params", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) {
			g.GenerationParams["stop"] = []any{1.0, math.Inf(1)}
		}, `generation_params: "stop": [1]`},
		{"bad images", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.Images = json.RawMessage(`[`) }, "images: not valid JSON"},
		{"NaN in a typed map", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) {
			g.GenerationParams["logit_bias"] = map[string]float64{"7": math.NaN()}
		}, "generation_params: atropos: NaN or Inf value"},
		{"Inf in a typed slice", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) {
			g.GroupOverrides["weights"] = []float32{1, float32(math.Inf(1))}
		}, "group_overrides: atropos: NaN or Inf value"},
		{"Inf in per-sequence overrides", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) {
			g.Overrides[0]["t"] = struct{ T float64 }{math.Inf(-1)}
		}, "overrides[0]: atropos: NaN or Inf value"},
		{"unencodable value", atropos.ValidateOptions{}, func(g *atropos.ScoredDataGroup) { g.GenerationParams["f"] = func() {} }, "generation_params: json: unsupported type: func()"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := goldenGroup(t)
			tc.mod(g)
			err := g.Validate(tc.opts)
			require.ErrorIs(t, err, atropos.ErrInvalidGroup)
			require.ErrorContains(t, err, tc.want)
			var ie *atropos.InvalidGroupError
			require.True(t, errors.As(err, &ie))
		})
	}
}

func TestValidateAllowNonPowerOfTwo(t *testing.T) {
	var g atropos.ScoredDataGroup
	for range 3 {
		require.NoError(t, g.Add(atropos.Sequence{Tokens: []int{1}, Masks: []int{1}}))
	}
	require.NoError(t, g.Validate(atropos.ValidateOptions{AllowNonPowerOfTwo: true}))
}

package atropos_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/chat"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func ptr[T any](v T) *T { return &v }

func rows(t testing.TB, n int, set map[int][2]any) *atropos.DistillRows {
	t.Helper()
	r := atropos.NewDistillRows(n)
	for pos, v := range set {
		require.NoError(t, r.SetRow(pos, v[0].([]int32), v[1].([]float32)))
	}
	return r
}

// goldenGroup is the group of testdata/group.golden.json, with every field set.
func goldenGroup(t testing.TB) *atropos.ScoredDataGroup {
	return &atropos.ScoredDataGroup{
		Tokens:      [][]int{{1, 10, 11, 12}, {1, 10, 13, 2}},
		Masks:       [][]int{{-100, -100, 11, 12}, {-100, -100, 13, 2}},
		Scores:      []float64{1, -0.5},
		Advantages:  [][]float64{{0, 0, 0.25, 0.25}, {0, 0, -0.125, -0.125}},
		RefLogprobs: [][]float64{{0, -1.5, -0.1, -2}, {0, -1.5, -0.3, -1e-7}},
		Messages: [][]json.RawMessage{
			{json.RawMessage(`{"role":"user","content":"hi"}`), json.RawMessage(`{"role":"assistant","content":"yo"}`)},
			{json.RawMessage(`{"role":"user","content":"hi"}`), json.RawMessage(`{"content":[{"type":"text","text":"hey"}],"reward":0.5,"role":"assistant"}`)},
		},
		GenerationParams:  map[string]any{"temperature": 1.0},
		InferenceLogprobs: [][]float64{{1, 1, -0.7, -0.01}, {1, 1, -1.25, -3e-8}},
		Overrides:         []map[string]any{{}, {"set_advantage_to_zero": true}},
		GroupOverrides:    map[string]any{"group_size": 2.0},
		Images:            json.RawMessage(`["aGVsbG8="]`),
		EnvID:             ptr(3),
		Distill: []*atropos.DistillRows{
			rows(t, 4, map[int][2]any{2: {[]int32{11, 40}, []float32{-0.1, -2.5}}, 3: {[]int32{12}, []float32{-0.001}}}),
			rows(t, 4, map[int][2]any{1: {[]int32{7, 8, 9}, []float32{-0.5, -1, -1.5}}, 3: {[]int32{2}, []float32{-1e-7}}}),
		},
	}
}

// distillOpt compares DistillRows by their rows, not their storage.
var distillOpt = cmp.Transformer("rows", distillFlat)

func distillFlat(r *atropos.DistillRows) flatRows {
	if r == nil {
		return flatRows{Nil: true}
	}
	out := flatRows{N: make([]int, r.Len())}
	for pos := range r.Len() {
		ids, lps := r.Row(pos)
		out.N[pos] = len(ids)
		out.IDs = append(out.IDs, ids...)
		out.Lps = append(out.Lps, lps...)
	}
	return out
}

// diffGroups is cmp.Diff(want, got) with distillOpt and rawOpt, with a fast path for
// equal groups (cmp is slow on long sequences).
func diffGroups(want, got *atropos.ScoredDataGroup) string {
	if reflect.DeepEqual(normGroup(want), normGroup(got)) {
		return ""
	}
	return cmp.Diff(want, got, distillOpt, rawOpt)
}

func normGroup(g *atropos.ScoredDataGroup) any {
	c := *g
	var d []flatRows
	for _, r := range g.Distill {
		d = append(d, distillFlat(r))
	}
	var msgs [][]any
	for _, seq := range g.Messages {
		var m []any
		for _, raw := range seq {
			var v any
			_ = json.Unmarshal(raw, &v)
			m = append(m, v)
		}
		msgs = append(msgs, m)
	}
	var images any
	_ = json.Unmarshal(g.Images, &images)
	c.Distill, c.Messages, c.Images = nil, nil, nil
	return []any{c, d, g.Distill == nil, msgs, g.Messages == nil, images}
}

type flatRows struct {
	Nil bool
	N   []int
	IDs []int32
	Lps []float32
}

// rawOpt compares raw JSON by value.
var rawOpt = cmp.Transformer("raw", func(r json.RawMessage) any {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return string(r)
	}
	return v
})

func TestGoldenFile(t *testing.T) {
	g := goldenGroup(t)
	require.NoError(t, g.Validate(atropos.ValidateOptions{GroupSize: 2}))
	got, err := json.Marshal(g)
	require.NoError(t, err)
	path := filepath.Join("testdata", "group.golden.json")
	if *update {
		var buf bytes.Buffer
		require.NoError(t, json.Indent(&buf, got, "", "  "))
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}
	golden, err := os.ReadFile(path)
	require.NoError(t, err)

	// The keys and their order are the API's 14 ScoredData fields.
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(got))
	_, _ = dec.Token()
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	want := []string{"tokens", "masks", "scores", "advantages", "ref_logprobs", "messages", "generation_params",
		"inference_logprobs", "overrides", "group_overrides", "images", "env_id", "distill_token_ids", "distill_logprobs"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}

	// Same value as the golden file (numbers compared as numbers).
	var wantV, gotV any
	require.NoError(t, json.Unmarshal(golden, &wantV))
	require.NoError(t, json.Unmarshal(got, &gotV))
	if diff := cmp.Diff(wantV, gotV); diff != "" {
		t.Errorf("encoding differs from %s (-want +got):\n%s", path, diff)
	}

	// Decoding the golden file gives the group back.
	var back atropos.ScoredDataGroup
	require.NoError(t, json.Unmarshal(golden, &back))
	if diff := cmp.Diff(g, &back, distillOpt, rawOpt); diff != "" {
		t.Errorf("decoded golden file (-want +got):\n%s", diff)
	}
}

func TestRoundTrip(t *testing.T) {
	long := make([]int, 20000)
	longMask := make([]int, len(long))
	longLp := make([]float64, len(long))
	longRows := atropos.NewDistillRows(len(long))
	for i := range long {
		long[i] = i % 151000
		longMask[i] = atropos.MaskIgnore
		longLp[i] = atropos.MaskedLogprob
		if i%3 == 0 {
			longMask[i] = long[i]
			longLp[i] = -float64(i%97) / 7
			k := i % 51 // ragged, including empty rows
			ids := make([]int32, k)
			lps := make([]float32, k)
			for j := range k {
				ids[j] = int32(j * 13)
				lps[j] = -float32(j) / 3
			}
			require.NoError(t, longRows.SetRow(i, ids, lps))
		}
	}
	tests := []struct {
		name string
		g    *atropos.ScoredDataGroup
	}{
		{"every field", goldenGroup(t)},
		{"required only", &atropos.ScoredDataGroup{Tokens: [][]int{{5, 6}}, Masks: [][]int{{-100, 6}}, Scores: []float64{0.5}}},
		{"empty distill rows", &atropos.ScoredDataGroup{
			Tokens: [][]int{{5, 6}, {7}}, Masks: [][]int{{-100, 6}, {7}}, Scores: []float64{0, 1},
			Distill: []*atropos.DistillRows{atropos.NewDistillRows(2), atropos.NewDistillRows(1)},
		}},
		{"long ragged sequence", &atropos.ScoredDataGroup{
			Tokens: [][]int{long}, Masks: [][]int{longMask}, Scores: []float64{math.SmallestNonzeroFloat64},
			InferenceLogprobs: [][]float64{longLp}, Distill: []*atropos.DistillRows{longRows},
			Images: json.RawMessage(`["aGVsbG8="]`),
		}},
		{"extreme floats", &atropos.ScoredDataGroup{
			Tokens: [][]int{{1, 2, 3}}, Masks: [][]int{{1, 2, 3}}, Scores: []float64{math.MaxFloat64},
			RefLogprobs: [][]float64{{-1e-300, 1e21, 123456789.123456789}},
			Distill: []*atropos.DistillRows{rows(t, 3, map[int][2]any{
				0: {[]int32{math.MaxInt32}, []float32{-math.MaxFloat32}},
				1: {[]int32{0}, []float32{-math.SmallestNonzeroFloat32}},
				2: {[]int32{1, 2}, []float32{0.1, -9999}},
			})},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.g)
			require.NoError(t, err)
			require.True(t, json.Valid(b), "invalid JSON")
			var back atropos.ScoredDataGroup
			require.NoError(t, json.Unmarshal(b, &back))
			if diff := diffGroups(tc.g, &back); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			// Encoding is deterministic: a second pass gives the same bytes.
			b2, err := json.Marshal(&back)
			require.NoError(t, err)
			require.Equal(t, string(b), string(b2))
		})
	}
}

func TestShortestFloats(t *testing.T) {
	g := &atropos.ScoredDataGroup{
		Tokens: [][]int{{1, 2}}, Masks: [][]int{{-100, 2}}, Scores: []float64{0.1},
		InferenceLogprobs: [][]float64{{1, -1e-7}},
		Distill:           []*atropos.DistillRows{rows(t, 2, map[int][2]any{1: {[]int32{2}, []float32{-0.1}}})},
	}
	b, err := json.Marshal(g)
	require.NoError(t, err)
	s := string(b)
	for _, want := range []string{`"scores":[0.1]`, `"inference_logprobs":[[1,-1e-7]]`, `"distill_logprobs":[[[],[-0.1]]]`} {
		require.Contains(t, s, want)
	}
}

func TestEncodeRejectsNonFinite(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*atropos.ScoredDataGroup)
	}{
		{"NaN score", func(g *atropos.ScoredDataGroup) { g.Scores[0] = math.NaN() }},
		{"Inf inference logprob", func(g *atropos.ScoredDataGroup) { g.InferenceLogprobs[0][2] = math.Inf(-1) }},
		{"NaN distill logprob", func(g *atropos.ScoredDataGroup) {
			require.NoError(t, g.Distill[0].SetRow(2, []int32{1}, []float32{float32(math.NaN())}))
		}},
		{"Inf in generation_params", func(g *atropos.ScoredDataGroup) { g.GenerationParams["temperature"] = math.Inf(1) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := goldenGroup(t)
			tc.mod(g)
			_, err := g.AppendJSON(nil, nil)
			require.ErrorIs(t, err, atropos.ErrNonFinite)
		})
	}
}

func TestEncodeRejectsInvalidRawJSON(t *testing.T) {
	g := goldenGroup(t)
	g.Messages[0][0] = json.RawMessage(`{"role":`)
	_, err := g.AppendJSON(nil, nil)
	require.ErrorContains(t, err, "messages[0][0]")
}

func TestRawJSONIsCompacted(t *testing.T) {
	g := goldenGroup(t)
	g.Images = json.RawMessage("[\n  \"a\",\n  \"b\"\n]")
	b, err := g.AppendJSON(nil, nil)
	require.NoError(t, err)
	require.NotContains(t, string(b), "\n")
	require.Contains(t, string(b), `"images":["a","b"]`)
}

func TestDenseZeroPad(t *testing.T) {
	r := rows(t, 3, map[int][2]any{1: {[]int32{5, 6, 7}, []float32{-0.1, -1, -2}}, 2: {[]int32{9}, []float32{-0.5}}})
	ids, lps := r.DenseZeroPad(2)
	if diff := cmp.Diff([][]int32{{0, 0}, {5, 6}, {9, 0}}, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]float32{{0, 0}, {-0.1, -1}, {-0.5, 0}}, lps); diff != "" {
		t.Errorf("logprobs (-want +got):\n%s", diff)
	}
	g := &atropos.ScoredDataGroup{Tokens: [][]int{{1, 5, 9}}, Masks: [][]int{{-100, 5, 9}}, Scores: []float64{1}, Distill: []*atropos.DistillRows{r}}
	b, err := g.AppendJSON(nil, &atropos.EncodeOptions{DenseZeroPad: 2})
	require.NoError(t, err)
	require.Contains(t, string(b), `"distill_token_ids":[[[0,0],[5,6],[9,0]]],"distill_logprobs":[[[0,0],[-0.1,-1],[-0.5,0]]]`)
	require.Panics(t, func() { r.DenseZeroPad(0) })
}

func TestDistillRows(t *testing.T) {
	r := atropos.NewDistillRows(4)
	require.Equal(t, 4, r.Len())
	require.NoError(t, r.SetRow(3, []int32{1, 2}, []float32{-1, -2}))
	require.NoError(t, r.SetRow(1, []int32{3}, []float32{-3}))
	require.NoError(t, r.SetRow(3, []int32{4}, []float32{-4})) // replace
	require.Equal(t, 2, r.Entries())
	ids, lps := r.Row(3)
	require.Equal(t, []int32{4}, ids)
	require.Equal(t, []float32{-4}, lps)
	ids, _ = r.Row(0)
	require.Empty(t, ids)
	c := r.Clone()
	r.Compact()
	for _, x := range []*atropos.DistillRows{r, c} {
		ids, lps = x.Row(1)
		require.Equal(t, []int32{3}, ids)
		require.Equal(t, []float32{-3}, lps)
		ids, _ = x.Row(3)
		require.Equal(t, []int32{4}, ids)
	}
	require.ErrorContains(t, r.SetRow(4, nil, nil), "out of range")
	require.ErrorContains(t, r.SetRow(-1, nil, nil), "out of range")
	require.ErrorContains(t, r.SetRow(0, []int32{1}, nil), "1 ids but 0 logprobs")
}

// TestFlatDistillRows builds rows from a flat layout: they read as the same rows set
// one by one, encode the same, share the flat arrays, and a row set afterwards does
// not write into them.
func TestFlatDistillRows(t *testing.T) {
	offsets := []int32{0, 0, 2, 2, 3}
	ids, lps := []int32{7, 8, 9, 99}[:3], []float32{-0.5, -1.5, -2, -9}[:3]
	r, err := atropos.FlatDistillRows(offsets, ids, lps)
	require.NoError(t, err)
	want := atropos.NewDistillRows(4)
	require.NoError(t, want.SetRow(1, []int32{7, 8}, []float32{-0.5, -1.5}))
	require.NoError(t, want.SetRow(3, []int32{9}, []float32{-2}))
	require.Equal(t, 4, r.Len())
	require.Equal(t, 3, r.Entries())
	for p := range 4 {
		gotIDs, gotLps := r.Row(p)
		wantIDs, wantLps := want.Row(p)
		require.Equal(t, wantIDs, gotIDs, "position %d", p)
		require.Equal(t, wantLps, gotLps, "position %d", p)
	}
	enc := func(d *atropos.DistillRows) []byte {
		g := atropos.ScoredDataGroup{Tokens: [][]int{{1, 2, 3, 4}}, Masks: [][]int{{-100, 2, 3, 4}}, Scores: []float64{1}, Distill: []*atropos.DistillRows{d}}
		b, err := g.AppendJSON(nil, nil)
		require.NoError(t, err)
		return b
	}
	require.Equal(t, string(enc(want)), string(enc(r)))
	got, _ := r.Row(1)
	require.Same(t, &ids[0], &got[0], "the rows copied the flat ids")

	require.NoError(t, r.SetRow(0, []int32{5}, []float32{-0.25}))
	require.Equal(t, int32(99), ids[:4][3], "SetRow wrote past the shared ids")
	got, _ = r.Row(3)
	require.Equal(t, []int32{9}, got)

	for _, bad := range []struct {
		offsets []int32
		ids     []int32
		lps     []float32
		msg     string
	}{
		{nil, nil, nil, "without offsets"},
		{[]int32{0, 1}, []int32{1}, nil, "1 ids but 0 logprobs"},
		{[]int32{0, 2, 1}, []int32{1, 2}, []float32{-1, -2}, "row 1 spans [2, 1)"},
		{[]int32{0, 3}, []int32{1, 2}, []float32{-1, -2}, "row 0 spans [0, 3) of 2"},
		{[]int32{-1, 1}, []int32{1, 2}, []float32{-1, -2}, "row 0 spans [-1, 1)"},
	} {
		_, err := atropos.FlatDistillRows(bad.offsets, bad.ids, bad.lps)
		require.ErrorContains(t, err, bad.msg)
	}
}

func TestAdd(t *testing.T) {
	var g atropos.ScoredDataGroup
	require.NoError(t, g.Add(atropos.Sequence{Tokens: []int{1, 2}, Masks: []int{-100, 2}, Score: 1, InferenceLogprobs: []float64{1, -0.4}}))
	d := atropos.NewDistillRows(3)
	require.NoError(t, d.SetRow(2, []int32{3, 4}, []float32{-0.5, -1}))
	require.NoError(t, g.Add(atropos.Sequence{
		Tokens: []int{1, 2, 3}, Masks: []int{-100, 2, 3}, Score: 0, InferenceLogprobs: []float64{1, -0.1, -0.2},
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "q"}}, Overrides: map[string]any{"temperature": 0.5},
		Distill: d,
	}))
	require.Equal(t, 2, g.Len())
	want := &atropos.ScoredDataGroup{
		Tokens: [][]int{{1, 2}, {1, 2, 3}}, Masks: [][]int{{-100, 2}, {-100, 2, 3}}, Scores: []float64{1, 0},
		InferenceLogprobs: [][]float64{{1, -0.4}, {1, -0.1, -0.2}},
		Messages:          [][]json.RawMessage{{}, {json.RawMessage(`{"role":"user","content":"q"}`)}},
		Overrides:         []map[string]any{{}, {"temperature": 0.5}},
		Distill:           []*atropos.DistillRows{atropos.NewDistillRows(2), d},
	}
	if diff := cmp.Diff(want, &g, distillOpt, rawOpt); diff != "" {
		t.Errorf("group (-want +got):\n%s", diff)
	}
	ids, lps := g.DistillRow(1, 2)
	require.Equal(t, []int32{3, 4}, ids)
	require.Equal(t, []float32{-0.5, -1}, lps)
	ids, _ = g.DistillRow(0, 1)
	require.Empty(t, ids)
	msgs, err := g.ChatMessages(1)
	require.NoError(t, err)
	require.Equal(t, []chat.Message{{Role: "user", Content: "q"}}, msgs)

	// A later sequence without distill rows gets empty rows.
	require.NoError(t, g.Add(atropos.Sequence{Tokens: []int{7}, Masks: []int{7}, InferenceLogprobs: []float64{-0.2}}))
	require.Equal(t, 1, g.Distill[2].Len())
	require.Equal(t, 0, g.Distill[2].Entries())
	require.Len(t, g.InferenceLogprobs, 3)
	require.False(t, g.ScoresEqual())

	bad := []struct {
		name string
		s    atropos.Sequence
		want string
	}{
		{"masks", atropos.Sequence{Tokens: []int{1}, Masks: []int{}}, "0 masks for 1 tokens"},
		{"logprobs", atropos.Sequence{Tokens: []int{1}, Masks: []int{1}, InferenceLogprobs: []float64{1, 2}}, "2 inference_logprobs for 1 tokens"},
		{"distill", atropos.Sequence{Tokens: []int{1}, Masks: []int{1}, Distill: atropos.NewDistillRows(2)}, "2 distill rows for 1 tokens"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			var g atropos.ScoredDataGroup
			require.ErrorContains(t, g.Add(tc.s), tc.want)
			require.Equal(t, 0, g.Len())
		})
	}
}

// TestAddAgreesWithValidate: a per-token field is all or none per group. Add refuses a
// mix either way, and every group Add builds without one is valid with it null.
func TestAddAgreesWithValidate(t *testing.T) {
	seq := func(lp, ref, adv bool) atropos.Sequence {
		s := atropos.Sequence{Tokens: []int{1, 2}, Masks: []int{-100, 2}, Score: 1}
		if lp {
			s.InferenceLogprobs = []float64{1, -0.5}
		}
		if ref {
			s.RefLogprobs = []float64{-0.1, -0.2}
		}
		if adv {
			s.Advantages = []float64{0, 0.5}
		}
		return s
	}
	for _, tc := range []struct {
		name        string
		first, then atropos.Sequence
		want        string
	}{
		{"inference_logprobs added", seq(false, false, false), seq(true, false, false), "sequence 1 has inference_logprobs and the earlier ones have none"},
		{"inference_logprobs dropped", seq(true, false, false), seq(false, false, false), "sequence 1 has no inference_logprobs"},
		{"ref_logprobs added", seq(true, false, false), seq(true, true, false), "has ref_logprobs"},
		{"advantages dropped", seq(true, false, true), seq(true, false, false), "has no advantages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g atropos.ScoredDataGroup
			require.NoError(t, g.Add(tc.first))
			require.ErrorContains(t, g.Add(tc.then), tc.want)
			require.Equal(t, 1, g.Len(), "the refused sequence was not added")
			require.NoError(t, g.Validate(atropos.ValidateOptions{AllowNonPowerOfTwo: true}))
		})
	}
	for _, mask := range []int{0, 1, 2, 4, 7} {
		var g atropos.ScoredDataGroup
		for range 2 {
			require.NoError(t, g.Add(seq(mask&1 != 0, mask&2 != 0, mask&4 != 0)))
		}
		require.NoError(t, g.Validate(atropos.ValidateOptions{}), "fields present: %03b", mask)
		require.Equal(t, mask&2 == 0, g.RefLogprobs == nil)
		require.Equal(t, mask&4 == 0, g.Advantages == nil)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"not an object", `[1]`, `want '{'`},
		{"missing scores", `{"tokens":[[1]],"masks":[[1]]}`, `missing required key "scores"`},
		{"null tokens", `{"tokens":null,"masks":[[1]],"scores":[1]}`, `must not be null`},
		{"NaN", `{"tokens":[[1]],"masks":[[1]],"scores":[NaN]}`, `NaN or Inf`},
		{"Infinity", `{"tokens":[[1]],"masks":[[1]],"scores":[1],"ref_logprobs":[[-Infinity]]}`, `NaN or Inf`},
		{"Infinity distill logprob", `{"tokens":[[1]],"masks":[[1]],"scores":[1],"distill_token_ids":[[[1]]],"distill_logprobs":[[[Infinity]]]}`, `NaN or Inf`},
		{"float token", `{"tokens":[[1.5]],"masks":[[1]],"scores":[1]}`, `want an integer`},
		{"bad number", `{"tokens":[[1]],"masks":[[1]],"scores":[01]}`, `bad number`},
		{"trailing data", `{"tokens":[[1]],"masks":[[1]],"scores":[1]} x`, `unexpected data`},
		{"one distill side", `{"tokens":[[1]],"masks":[[1]],"scores":[1],"distill_token_ids":[[[]]]}`, `both null or both set`},
		{"distill shape", `{"tokens":[[1]],"masks":[[1]],"scores":[1],"distill_token_ids":[[[1,2]]],"distill_logprobs":[[[-1]]]}`, `has 2 ids, distill_logprobs 1`},
		{"distill overflow", `{"tokens":[[1]],"masks":[[1]],"scores":[1],"distill_token_ids":[[[1]]],"distill_logprobs":[[[-1e39]]]}`, `bad number`},
		{"message not object", `{"tokens":[[1]],"masks":[[1]],"scores":[1],"messages":[["hi"]]}`, `must be an object`},
		{"truncated", `{"tokens":[[1]],"masks":[[1`, `unexpected end`},
		{"bad env_id", `{"tokens":[[1]],"masks":[[1]],"scores":[1],"env_id":"x"}`, `want a number`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g atropos.ScoredDataGroup
			err := g.UnmarshalJSON([]byte(tc.in))
			require.ErrorIs(t, err, atropos.ErrSyntax)
			require.ErrorContains(t, err, tc.want)
			if tc.want == `NaN or Inf` {
				require.ErrorIs(t, err, atropos.ErrNonFinite)
			}
		})
	}
}

func TestDecodeLenient(t *testing.T) {
	// Unknown keys are ignored, integral floats accepted in integer fields, missing
	// optional keys are absent, escaped keys are understood.
	in := `{"extra":{"a":[1,2]}, "tok\u0065ns":[[1.0, 2e0]], "masks":[[-100,2]], "scores":[3], "env_id": 2.0, "z": 5, "y": true}`
	var g atropos.ScoredDataGroup
	require.NoError(t, json.Unmarshal([]byte(in), &g))
	want := &atropos.ScoredDataGroup{Tokens: [][]int{{1, 2}}, Masks: [][]int{{-100, 2}}, Scores: []float64{3}, EnvID: ptr(2)}
	if diff := cmp.Diff(want, &g, distillOpt); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	require.False(t, strings.Contains(in, "\n"))
}

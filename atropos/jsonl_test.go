package atropos_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
)

func TestJSONLRoundTrip(t *testing.T) {
	groups := []*atropos.ScoredDataGroup{goldenGroup(t), bigGroup(2, 3000, 50), goldenGroup(t)}
	var buf bytes.Buffer
	require.NoError(t, atropos.WriteJSONL(&buf, groups...))
	require.Equal(t, len(groups), strings.Count(buf.String(), "\n"), "one line per group")

	var got []*atropos.ScoredDataGroup
	require.NoError(t, atropos.ReadJSONL(&buf, func(g *atropos.ScoredDataGroup) error {
		got = append(got, g)
		return nil
	}))
	require.Len(t, got, len(groups))
	for i := range groups {
		if diff := diffGroups(groups[i], got[i]); diff != "" {
			t.Errorf("group %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestDecoderBlankLinesAndNoFinalNewline(t *testing.T) {
	line, err := goldenGroup(t).MarshalJSON()
	require.NoError(t, err)
	in := "\n" + string(line) + "\n\r\n  \n" + string(line)
	dec := atropos.NewDecoder(strings.NewReader(in))
	for range 2 {
		g, err := dec.Decode()
		require.NoError(t, err)
		require.Equal(t, 2, g.Len())
	}
	_, err = dec.Decode()
	require.ErrorIs(t, err, io.EOF)
}

func TestDecoderNamesTheLine(t *testing.T) {
	line, err := goldenGroup(t).MarshalJSON()
	require.NoError(t, err)
	in := string(line) + "\n" + `{"tokens":[[1]]}` + "\n"
	n := 0
	err = atropos.ReadJSONL(strings.NewReader(in), func(*atropos.ScoredDataGroup) error { n++; return nil })
	require.ErrorIs(t, err, atropos.ErrSyntax)
	require.ErrorContains(t, err, "line 2")
	require.Equal(t, 1, n)
}

func TestReadJSONLStopsOnCallbackError(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, atropos.WriteJSONL(&buf, goldenGroup(t), goldenGroup(t)))
	stop := errors.New("stop")
	n := 0
	err := atropos.ReadJSONL(&buf, func(*atropos.ScoredDataGroup) error { n++; return stop })
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, n)
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after -= len(p); w.after < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestEncoderErrors(t *testing.T) {
	enc := atropos.NewEncoder(&failWriter{after: 100})
	err := enc.Encode(bigGroup(1, 100000, 10))
	require.ErrorContains(t, err, "disk full")
	require.ErrorContains(t, enc.Encode(goldenGroup(t)), "disk full", "the error sticks")

	g := goldenGroup(t)
	g.Scores[0] = math.NaN()
	err = atropos.WriteJSONL(io.Discard, goldenGroup(t), g)
	require.ErrorIs(t, err, atropos.ErrNonFinite)
	require.ErrorContains(t, err, "group 1")
}

func TestEncoderDenseZeroPad(t *testing.T) {
	var buf bytes.Buffer
	enc := atropos.NewEncoder(&buf)
	enc.SetOptions(atropos.EncodeOptions{DenseZeroPad: 3})
	require.NoError(t, enc.Encode(goldenGroup(t)))
	g, err := atropos.NewDecoder(&buf).Decode()
	require.NoError(t, err)
	for seq := range g.Len() {
		for pos := range g.Tokens[seq] {
			ids, _ := g.DistillRow(seq, pos)
			require.Len(t, ids, 3)
		}
	}
	ids, lps := g.DistillRow(1, 1)
	require.Equal(t, []int32{7, 8, 9}, ids)
	require.Equal(t, []float32{-0.5, -1, -1.5}, lps)
	ids, lps = g.DistillRow(0, 0)
	require.Equal(t, []int32{0, 0, 0}, ids)
	require.Equal(t, []float32{0, 0, 0}, lps)
}

// TestEncoderBadGroupWritesNothing checks that a group the encoder refuses (a NaN deep
// inside, invalid raw JSON) leaves no partial line behind, even when its first fields
// were large enough to be streamed already: the next group still starts a clean line.
func TestEncoderBadGroupWritesNothing(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*atropos.ScoredDataGroup)
	}{
		{"NaN distill logprob", func(g *atropos.ScoredDataGroup) {
			last := g.Distill[1].Len() - 1
			require.NoError(t, g.Distill[1].SetRow(last, []int32{1}, []float32{float32(math.NaN())}))
		}},
		{"Inf inference logprob", func(g *atropos.ScoredDataGroup) { g.InferenceLogprobs[1][7] = math.Inf(-1) }},
		{"NaN in group_overrides", func(g *atropos.ScoredDataGroup) { g.GroupOverrides = map[string]any{"t": math.NaN()} }},
		{"bad images", func(g *atropos.ScoredDataGroup) { g.Images = []byte(`{"a":`) }},
		{"unencodable generation_params", func(g *atropos.ScoredDataGroup) { g.GenerationParams = map[string]any{"f": func() {}} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := bigGroup(2, 20000, 8) // tokens and masks alone exceed the flush size
			tc.mod(bad)
			var buf bytes.Buffer
			enc := atropos.NewEncoder(&buf)
			require.Error(t, enc.Encode(bad))
			require.Zero(t, buf.Len(), "nothing written for a refused group")
			require.NoError(t, enc.Encode(goldenGroup(t)), "the encoder stays usable")
			var n int
			require.NoError(t, atropos.ReadJSONL(&buf, func(*atropos.ScoredDataGroup) error { n++; return nil }))
			require.Equal(t, 1, n)
		})
	}
}

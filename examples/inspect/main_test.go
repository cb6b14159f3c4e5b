package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/clitest"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeGroups writes two small groups with teacher rows to a JSONL file.
func writeGroups(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "groups.jsonl")
	var buf bytes.Buffer
	for range 2 {
		g := &atropos.ScoredDataGroup{}
		for s := range 2 {
			rows := atropos.NewDistillRows(5)
			require.NoError(t, rows.SetRow(3, []int32{40, 41}, []float32{-0.1, -2}))
			require.NoError(t, g.Add(atropos.Sequence{
				Tokens: []int{10, 11, 12, 40, 13}, Masks: []int{-100, -100, 12, 40, 13}, Score: float64(s),
				InferenceLogprobs: []float64{1, 1, -0.3, -0.4, -0.5}, Distill: rows,
			}))
		}
		require.NoError(t, atropos.WriteJSONL(&buf, g))
	}
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// TestInspectCountsTokensOutsideTheTopK: a group whose sampled token at position 4 is
// outside the teacher's top-2, with the row's lowest logprob (-2) above the student's
// (-5): the page counts it outside the top-K and leaves it out of the mean Δ, whether
// or not the file carries ref_logprobs (the teacher's exact logprobs, here -9).
func TestInspectCountsTokensOutsideTheTopK(t *testing.T) {
	for _, c := range []struct {
		name string
		ref  [][]float64
	}{
		{"distill rows only", nil},
		{"with ref_logprobs", [][]float64{{1, 1, 1, -0.1, -9}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := atropos.NewDistillRows(5)
			require.NoError(t, rows.SetRow(3, []int32{40, 41}, []float32{-0.1, -2}))
			require.NoError(t, rows.SetRow(4, []int32{50, 51}, []float32{-0.5, -2}))
			g := &atropos.ScoredDataGroup{}
			seq := atropos.Sequence{
				Tokens: []int{10, 11, 12, 40, 13}, Masks: []int{-100, -100, 12, 40, 13}, Score: 1,
				InferenceLogprobs: []float64{1, 1, -0.3, -0.4, -5}, Distill: rows,
			}
			if c.ref != nil {
				seq.RefLogprobs = c.ref[0]
			}
			require.NoError(t, g.Add(seq))
			var buf bytes.Buffer
			require.NoError(t, atropos.WriteJSONL(&buf, g))
			in := filepath.Join(t.TempDir(), "groups.jsonl")
			require.NoError(t, os.WriteFile(in, buf.Bytes(), 0o644))
			out := filepath.Join(t.TempDir(), "report.html")
			require.NoError(t, run(context.Background(), []string{"-in", in, "-html", out}, new(bytes.Buffer)))
			page, err := os.ReadFile(out)
			require.NoError(t, err)
			assert.Contains(t, string(page), `<td class="scored">2</td><td class="outside">1</td><td class="hints" title="not in the source: JSON Lines of groups carry no hints">–</td><td class="delta">0.300</td>`,
				"2 scored, 1 outside the top-K, mean Δ over position 3 alone: -0.1 - -0.4")
		})
	}
}

func TestInspectUsesTheServersDetokenizer(t *testing.T) {
	in := writeGroups(t)
	srv := vllmtest.NewServer(t)
	out := filepath.Join(t.TempDir(), "report.html")
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-in", in, "-html", out, "-vllm-url", srv.URL}, &stdout), stdout.String())
	assert.Contains(t, stdout.String(), "wrote 2 groups to "+out)
	page, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(page), `<section class="group"`))
	assert.Equal(t, 6, srv.RequestCount("/detokenize"), "ids 10, 11, 12, 13, 40 and 41, each once for both groups")
}

func TestInspectWithoutADetokenizerShowsIDs(t *testing.T) {
	in := writeGroups(t)
	out := filepath.Join(t.TempDir(), "report.html")
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-in", in, "-html", out}, &stdout))
	assert.Contains(t, stdout.String(), "the page shows token ids")
	page, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(page), `"40":"⟨40⟩"`)
}

func TestInspectErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "report.html")
	empty := filepath.Join(dir, "empty.jsonl")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{not json\n"), 0o644))
	for name, args := range map[string][]string{
		"missing": {"-in", filepath.Join(dir, "missing.jsonl"), "-html", out},
		"empty":   {"-in", empty, "-html", out},
		"bad":     {"-in", bad, "-html", out},
	} {
		t.Run(name, func(t *testing.T) {
			require.Error(t, run(context.Background(), args, new(bytes.Buffer)))
			assert.NoFileExists(t, out, "no half-written page")
		})
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary file left")
}

func TestInspectFlags(t *testing.T) {
	clitest.CheckFlags(t, run, []string{"in", "html", "vllm-url", "model", "simulator", "show-topk"},
		[]clitest.BadLine{
			clitest.Bad("in"),
			clitest.Bad("show-topk", "-in", "x.jsonl", "-show-topk", "0"),
			clitest.Bad("vllm-url", "-in", "x.jsonl", "-vllm-url", "localhost:8000"),
			clitest.Bad("simulator", "-in", "x.jsonl", "-simulator", "-vllm-url", "http://127.0.0.1:1"),
			clitest.Bad("simulator", "-simulator=maybe"),
		})
}

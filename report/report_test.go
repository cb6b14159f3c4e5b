package report_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/report"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// q is the page's stored form of a logprob.
func q(lp float64) uint16 {
	if math.IsNaN(lp) || lp > 0 {
		return math.MaxUint16
	}
	return uint16(math.Round(-lp * 1000))
}

func TestPageStructureAndNumbersMatchTheGroups(t *testing.T) {
	sim := vllmtest.NewServer(t)
	groups := []report.Group{
		synthGroup(1, "task </script><b>one</b>", 3, 400, sim.VocabSize(), 20),
		synthGroup(2, "task two", 2, 250, sim.VocabSize(), 3),
	}
	groups[1].Note = "dropped: scores_equal"
	const topK = 5
	var buf bytes.Buffer
	require.NoError(t, report.Write(context.Background(), &buf, report.Options{TopK: topK, Detokenizer: sim.Client()}, groups...))
	p := parsePage(t, buf.String())

	// Self-contained: no element loads anything, and the policy forbids it anyway.
	for _, n := range findAll(p.doc, func(*html.Node) bool { return true }) {
		assert.NotContains(t, []string{"link", "img", "iframe", "object", "embed"}, n.Data)
		for _, a := range n.Attr {
			if a.Key == "src" || a.Key == "href" {
				assert.True(t, strings.HasPrefix(a.Val, "#"), "%s=%q", a.Key, a.Val)
			}
		}
	}
	csp := findAll(p.doc, func(n *html.Node) bool { return n.Data == "meta" && attr(n, "http-equiv") == "Content-Security-Policy" })
	require.Len(t, csp, 1)
	assert.Contains(t, attr(csp[0], "content"), "default-src 'none'")
	assert.Empty(t, findAll(p.doc, func(n *html.Node) bool { return n.Data == "b" }), "titles and hints are escaped")

	sections := findAll(p.doc, func(n *html.Node) bool { return hasClass(n, "group") })
	require.Len(t, sections, len(groups))
	require.Len(t, p.data, len(groups))
	for gi, g := range groups {
		sec := sections[gi]
		assert.Equal(t, g.Title, textOf(findAll(sec, func(n *html.Node) bool { return n.Data == "h2" })[0]))
		if g.Note != "" {
			assert.Contains(t, textOf(sec), g.Note)
		}
		metrics := findAll(sec, func(n *html.Node) bool { return hasClass(n, "metric") })
		assert.Len(t, metrics, len(g.Metrics))
		rows := findAll(sec, func(n *html.Node) bool { return n.Data == "tr" && attr(n, "data-seq") != "" })
		require.Len(t, rows, len(g.Sequences))
		assert.Len(t, findAll(sec, func(n *html.Node) bool { return n.Data == "details" && hasClass(n, "seq") }), len(g.Sequences))

		for si, s := range g.Sequences {
			// The rollout's row: numbers counted here from the group itself.
			scored, bounds, generated := 0, 0, 0
			var deltas []float64
			for pos := range s.Tokens {
				if s.Kinds[pos] == report.KindGenerated {
					generated++
				}
				ids, lps := s.Rows.Row(pos)
				if len(ids) == 0 {
					continue
				}
				scored++
				if i := slices.Index(ids, s.Tokens[pos]); i >= 0 {
					deltas = append(deltas, float64(lps[i])-s.StudentLogprobs[pos])
				} else {
					bounds++
				}
			}
			mean := 0.0
			for _, d := range deltas {
				mean += d / float64(len(deltas))
			}
			cell := func(class string) string {
				return textOf(findAll(rows[si], func(n *html.Node) bool { return hasClass(n, class) })[0])
			}
			assert.Equal(t, fmt.Sprintf("%.3f", s.Score), cell("score"))
			assert.Equal(t, strconv.Itoa(len(s.Tokens)), cell("tokens"))
			assert.Equal(t, strconv.Itoa(generated), cell("generated"))
			assert.Equal(t, strconv.Itoa(scored), cell("scored"))
			assert.Equal(t, strconv.Itoa(bounds), cell("outside"))
			assert.Positive(t, bounds)
			assert.Equal(t, strconv.Itoa(len(s.Hints)), cell("hints"))
			assert.Equal(t, fmt.Sprintf("%.3f", mean), cell("delta"))
			assert.Equal(t, "1.000", cell("term"))

			// The token data: every number, against the group.
			d := p.data[gi].Seqs[si]
			require.Equal(t, len(s.Tokens), d.N)
			assert.Equal(t, s.Tokens, d.Tokens)
			k := 0
			for pos := range s.Tokens {
				f := d.Flags[pos]
				assert.Equal(t, uint8(s.Kinds[pos]), f&7, "kind at %d", pos)
				assert.Equal(t, s.Masked[pos], f&8 != 0, "mask at %d", pos)
				assert.Equal(t, q(s.StudentLogprobs[pos]), d.Student[pos], "student logprob at %d", pos)
				ids, lps := s.Rows.Row(pos)
				assert.Equal(t, len(ids) > 0, f&16 != 0, "scored at %d", pos)
				want, bound := math.NaN(), math.NaN()
				if i := slices.Index(ids, s.Tokens[pos]); i >= 0 {
					want = float64(lps[i])
				} else if len(ids) > 0 {
					bound = float64(slices.Min(lps))
				}
				assert.Equal(t, len(ids) > 0 && math.IsNaN(want), f&32 != 0, "outside flag at %d", pos)
				assert.Equal(t, q(want), d.Teacher[pos], "teacher logprob at %d: never a bound", pos)
				assert.Equal(t, q(bound), d.Bound[pos], "bound at %d", pos)
				assert.Equal(t, uint16(len(ids)), d.Entries[pos], "the row's entries at %d", pos)
				n := min(len(ids), topK)
				require.Equal(t, uint8(n), d.TopN[pos])
				for i := range n {
					assert.Equal(t, ids[i], d.TopIDs[k+i])
					assert.Equal(t, q(float64(lps[i])), d.TopLPs[k+i])
				}
				k += n
			}
			require.Len(t, d.Hints, len(s.Hints))
			for i, h := range s.Hints {
				assert.Equal(t, h.Pos, d.Hints[i].Pos)
				assert.Equal(t, h.Text, d.Hints[i].Text)
			}
		}
	}

	// Token text is the server's detokenizer's, for every id the page shows.
	c := sim.Client()
	asked := map[int32]bool{}
	for _, g := range p.data {
		for _, s := range g.Seqs {
			for _, id := range append(slices.Clone(s.Tokens), s.TopIDs...) {
				text, ok := p.vocab[strconv.Itoa(int(id))]
				require.True(t, ok, "id %d has no text", id)
				if id%97 == 0 && !asked[id] { // a sample: the server is asked again
					asked[id] = true
					want, err := c.Detokenize(context.Background(), []int32{id})
					require.NoError(t, err)
					assert.Equal(t, want, text)
				}
			}
		}
	}
	assert.Equal(t, len(p.vocab), sim.RequestCount("/detokenize")-countSampled(p), "one request per id")
}

// countSampled is the number of detokenize requests the test itself made.
func countSampled(p *page) int {
	seen := map[int32]bool{}
	for _, g := range p.data {
		for _, s := range g.Seqs {
			for _, id := range append(slices.Clone(s.Tokens), s.TopIDs...) {
				if id%97 == 0 {
					seen[id] = true
				}
			}
		}
	}
	return len(seen)
}

func TestFromScoredData(t *testing.T) {
	g := &atropos.ScoredDataGroup{}
	rows := atropos.NewDistillRows(6)
	require.NoError(t, rows.SetRow(3, []int32{12, 11}, []float32{-0.1, -2.5}))
	require.NoError(t, rows.SetRow(4, []int32{30, 31}, []float32{-0.2, -3}))
	require.NoError(t, g.Add(atropos.Sequence{
		Tokens:            []int{1, 2, 3, 11, 12, 5},
		Masks:             []int{-100, -100, 3, 11, 12, -100},
		Score:             0.75,
		InferenceLogprobs: []float64{1, 1, -0.5, -1, -2, 1},
		Distill:           rows,
	}))
	rg := report.FromScoredData("from jsonl", g)
	require.Len(t, rg.Sequences, 1)
	s := rg.Sequences[0]
	assert.Equal(t, 0.75, s.Score)
	assert.Equal(t, []bool{true, true, false, false, false, true}, s.Masked)
	assert.True(t, math.IsNaN(s.StudentLogprobs[0]), "the 1.0 sentinel is no logprob")
	assert.Equal(t, -1.0, s.StudentLogprobs[3])

	var buf bytes.Buffer
	require.NoError(t, report.Write(context.Background(), &buf, report.Options{Detokenizer: fakeDetok{}}, rg))
	p := parsePage(t, buf.String())
	d := p.data[0].Seqs[0]
	kinds := make([]uint8, 6)
	for i, f := range d.Flags {
		kinds[i] = f & 7
	}
	assert.Equal(t, []uint8{0, 0, 1, 1, 1, 2}, kinds, "prompt, generated, then a masked tail as tool result")
	assert.Equal(t, uint16(2500), d.Teacher[3], "sampled 11 is in the row at -2.5")
	assert.Equal(t, uint16(math.MaxUint16), d.Teacher[4], "sampled 12 is not in the row: no teacher logprob")
	assert.Equal(t, uint16(3000), d.Bound[4], "the row's lowest entry bounds it")
	assert.NotZero(t, d.Flags[4]&32)
	assert.Equal(t, "·12 ", p.vocab["12"])
}

func TestWriterErrors(t *testing.T) {
	bad := synthGroup(3, "bad", 1, 50, 100, 2)
	bad.Sequences[0].Masked = bad.Sequences[0].Masked[:10]
	rw, err := report.NewWriter(new(bytes.Buffer), report.Options{})
	require.NoError(t, err)
	err = rw.Add(context.Background(), bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "10 Masked for 50 tokens")
	assert.Equal(t, err, rw.Close(), "a failed writer keeps its error")

	rw, err = report.NewWriter(new(bytes.Buffer), report.Options{Detokenizer: failing{}})
	require.NoError(t, err)
	err = rw.Add(context.Background(), synthGroup(4, "g", 1, 50, 100, 2))
	require.ErrorIs(t, err, errDown)

	rw, err = report.NewWriter(new(bytes.Buffer), report.Options{})
	require.NoError(t, err)
	require.NoError(t, rw.Close())
	require.ErrorIs(t, rw.Close(), report.ErrClosed)
	require.ErrorIs(t, rw.Add(context.Background(), report.Group{}), report.ErrClosed)

	hint := synthGroup(5, "g", 1, 50, 100, 2)
	hint.Sequences[0].Hints = []report.Hint{{Pos: 51, Text: "x"}}
	err = report.Write(context.Background(), new(bytes.Buffer), report.Options{}, hint)
	assert.ErrorContains(t, err, "hint at position 51 of 50")
}

var errDown = errors.New("server down")

type failing struct{}

func (failing) Detokenize(context.Context, []int32) (string, error) { return "", errDown }

// big is 8 rollouts of 16k tokens, every position scored with 50 teacher entries: the
// worst case of the page's size.
func big() report.Group {
	g := synthGroup(6, "8 x 16k", 8, 16384, 150000, 50)
	for _, s := range g.Sequences {
		ids := make([]int32, 50)
		lps := make([]float32, 50)
		for p, id := range s.Tokens {
			for i := range ids {
				ids[i], lps[i] = (id+int32(i)*7919)%150000, -float32(i)*0.37
			}
			if err := s.Rows.SetRow(p, ids, lps); err != nil {
				panic(err)
			}
			if math.IsNaN(s.StudentLogprobs[p]) {
				s.StudentLogprobs[p] = -0.5
			}
		}
	}
	return g
}

// TestPageSize8x16k: 8 rollouts of 16k tokens, every position with 50 teacher
// entries, make a page under 20 MB.
func TestPageSize8x16k(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a large page")
	}
	g := big()
	var cw countWriter
	require.NoError(t, report.Write(context.Background(), &cw, report.Options{Detokenizer: fakeDetok{}}, g))
	t.Logf("8 x 16k tokens: %.1f MB", float64(cw)/1e6)
	assert.Less(t, int(cw), 20<<20)
}

type countWriter int

func (c *countWriter) Write(b []byte) (int, error) { *c += countWriter(len(b)); return len(b), nil }

func BenchmarkWrite8x16k(b *testing.B) {
	g := big()
	for b.Loop() {
		var cw countWriter
		if err := report.Write(context.Background(), &cw, report.Options{Detokenizer: fakeDetok{}}, g); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(cw)/1e6, "MB/page")
	}
}

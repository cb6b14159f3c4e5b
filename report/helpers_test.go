package report_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/report"
)

// synthSeq makes a rollout of n tokens with ids below vocab: a prompt, then turns of
// generated tokens and tool results; every third generated token is scored with a
// row of k entries (the sampled token in the row, except at every fifth scored one),
// and a hint before every other turn.
func synthSeq(r *rand.Rand, label string, n, vocab, k int) report.Sequence {
	s := report.Sequence{
		Label: label, Score: r.Float64(),
		Breakdown:       []report.Term{{Name: "correctness", Value: "1.000"}},
		Tokens:          make([]int32, n),
		Kinds:           make([]report.Kind, n),
		Masked:          make([]bool, n),
		StudentLogprobs: make([]float64, n),
		Rows:            atropos.NewDistillRows(n),
	}
	prompt := n / 10
	scored := 0
	for p := range n {
		s.Tokens[p] = int32(r.IntN(vocab))
		s.StudentLogprobs[p] = math.NaN()
		switch {
		case p < prompt:
			s.Kinds[p], s.Masked[p] = report.KindPrompt, true
		case (p/50)%2 == 1:
			s.Kinds[p], s.Masked[p] = report.KindTool, true
		default:
			s.Kinds[p] = report.KindGenerated
			s.StudentLogprobs[p] = -r.Float64() * 3
			if p%50 == 0 && (p/100)%2 == 0 {
				s.Hints = append(s.Hints, report.Hint{Pos: p, Text: "Run the tests <before> you answer & check."})
			}
			if p%3 != 0 {
				continue
			}
			ids := make([]int32, k)
			lps := make([]float32, k)
			for i := range k {
				ids[i] = int32(r.IntN(vocab))
				lps[i] = -float32(i)*0.5 - float32(r.Float64())*0.1
			}
			if scored%5 != 4 {
				ids[r.IntN(k)] = s.Tokens[p]
			} else {
				for i := range ids {
					if ids[i] == s.Tokens[p] {
						ids[i] = (ids[i] + 1) % int32(vocab)
					}
				}
			}
			scored++
			if err := s.Rows.SetRow(p, ids, lps); err != nil {
				panic(err)
			}
		}
	}
	return s
}

func synthGroup(seed uint64, title string, seqs, n, vocab, k int) report.Group {
	r := rand.New(rand.NewPCG(seed, 1))
	g := report.Group{Title: title, Metrics: map[string]float64{"opd/total_hints": 3, "train/mean_reward": 0.5}}
	for i := range seqs {
		g.Sequences = append(g.Sequences, synthSeq(r, "rollout "+strconv.Itoa(i), n, vocab, k))
	}
	return g
}

// fakeDetok detokenizes id as "·id " (for tests that need no server).
type fakeDetok struct{}

func (fakeDetok) Detokenize(_ context.Context, ids []int32) (string, error) {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString("·" + strconv.Itoa(int(id)) + " ")
	}
	return b.String(), nil
}

// page is a parsed report page.
type page struct {
	doc   *html.Node
	vocab map[string]string
	data  []pageGroup
}

type pageSeq struct {
	N       int
	Tokens  []int32
	Flags   []uint8
	Student []uint16
	Teacher []uint16
	Bound   []uint16
	Entries []uint16
	TopN    []uint8
	TopIDs  []int32
	TopLPs  []uint16
	Hints   []struct {
		Pos  int    `json:"pos"`
		Text string `json:"text"`
	}
}

type pageGroup struct{ Seqs []pageSeq }

func parsePage(t *testing.T, text string) *page {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(text))
	require.NoError(t, err)
	p := &page{doc: doc}
	for _, n := range findAll(doc, func(n *html.Node) bool { return n.Data == "script" && attr(n, "type") == "application/json" }) {
		body := textOf(n)
		switch id := attr(n, "id"); {
		case id == "vocab":
			require.NoError(t, json.Unmarshal([]byte(body), &p.vocab))
		case strings.HasPrefix(id, "data-"):
			var raw struct {
				Seqs []struct {
					N                                             int
					Tok, Flags, Slp, Tlp, Tbd, Kall, Kn, Kid, Klp string
					Hints                                         json.RawMessage
				}
			}
			require.NoError(t, json.Unmarshal([]byte(body), &raw))
			var g pageGroup
			for _, s := range raw.Seqs {
				ps := pageSeq{N: s.N}
				decode(t, s.Tok, &ps.Tokens, s.N)
				decode(t, s.Flags, &ps.Flags, s.N)
				decode(t, s.Slp, &ps.Student, s.N)
				decode(t, s.Tlp, &ps.Teacher, s.N)
				decode(t, s.Tbd, &ps.Bound, s.N)
				decode(t, s.Kall, &ps.Entries, s.N)
				decode(t, s.Kn, &ps.TopN, s.N)
				total := 0
				for _, k := range ps.TopN {
					total += int(k)
				}
				decode(t, s.Kid, &ps.TopIDs, total)
				decode(t, s.Klp, &ps.TopLPs, total)
				require.NoError(t, json.Unmarshal(s.Hints, &ps.Hints))
				g.Seqs = append(g.Seqs, ps)
			}
			p.data = append(p.data, g)
		}
	}
	return p
}

func decode[T int32 | uint8 | uint16](t *testing.T, s string, out *[]T, n int) {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	*out = make([]T, n)
	_, err = binary.Decode(b, binary.LittleEndian, *out)
	require.NoError(t, err)
	var zero T
	require.Equal(t, n*binary.Size(zero), len(b))
}

func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	if n.Type == html.ElementNode && match(n) {
		out = append(out, n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		out = append(out, findAll(c, match)...)
	}
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *html.Node, c string) bool {
	return n.Type == html.ElementNode && strings.Contains(" "+attr(n, "class")+" ", " "+c+" ")
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

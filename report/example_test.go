package report_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/report"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// Write renders groups as one self-contained page; token text comes from the
// server's detokenizer.
func ExampleWrite() {
	sim, err := vllmtest.Start()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sim.Close()
	rows := atropos.NewDistillRows(4)
	_ = rows.SetRow(2, []int32{12, 13}, []float32{-0.2, -1.9})
	g := report.Group{Title: "one group", Sequences: []report.Sequence{{
		Label:           "rollout 0",
		Score:           0.9,
		Tokens:          []int32{10, 11, 12, 13},
		Masked:          []bool{true, true, false, false},
		StudentLogprobs: []float64{math.NaN(), math.NaN(), -0.5, -0.1},
		Rows:            rows,
		Hints:           []report.Hint{{Pos: 2, Text: "Run the tests."}},
	}}}
	var page bytes.Buffer
	if err := report.Write(context.Background(), &page, report.Options{Detokenizer: sim.Client()}, g); err != nil {
		fmt.Println(err)
		return
	}
	html := page.String()
	fmt.Println(strings.HasPrefix(html, "<!DOCTYPE html>"), strings.Contains(html, `<td class="scored">1</td>`),
		strings.Contains(html, "http://"), sim.RequestCount("/detokenize"))
	// Output: true true false 4
}

// FromScoredData reads a group of JSON Lines: kinds follow from the masks.
func ExampleFromScoredData() {
	g := &atropos.ScoredDataGroup{}
	_ = g.Add(atropos.Sequence{Tokens: []int{1, 2, 3, 4}, Masks: []int{-100, 2, 3, -100}, Score: 1})
	s := report.FromScoredData("from a file", g).Sequences[0]
	fmt.Println(s.Label, s.Score, s.Masked)
	// Output: sequence 0 1 [true false false true]
}

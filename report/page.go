package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"maps"
	"math"
	"slices"
	"strconv"
)

//go:embed page.css
var pageCSS string

//go:embed page.js
var pageJS string

var pageTmpl = template.Must(template.New("page").Parse(`
{{- define "head" -}}
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<header>
<h1>{{.Title}}</h1>
<div id="run-status"><p class="status incomplete">This page is incomplete: the program writing it has not
finished, or it stopped before closing the page. The groups below are those written so far, and
their tokens show as ids until the page is closed.</p></div>
<p class="legend">
<span class="t k0">prompt and template</span>
<span class="t k1">generated</span>
<span class="t k2">tool result</span>
<span class="hint">hint</span>
<span class="t k0 m">masked (not trained on)</span>
<span class="t k1 s" style="background:hsla(0,85%,50%,.6)">teacher &lt; student</span>
<span class="t k1 s" style="background:hsla(215,85%,50%,.6)">teacher &gt; student</span>
<span class="t k1 s o">outside the teacher's top-K</span>
Scored tokens are coloured by the teacher's logprob of the sampled token minus the
student's (Δ). Where the sampled token is outside the teacher's top-K, the rows give
only an upper bound on that logprob: such tokens have a colour of their own, and are
left out of the mean Δ. Hover a token for the teacher's top-K. Open a rollout to see
its tokens.
</p>
</header>
<main>
{{end}}

{{- define "group" -}}
<section class="group" id="group-{{.Index}}" data-group="{{.Index}}">
<h2>{{.Title}}</h2>
{{- if .Note}}<p class="note">{{.Note}}</p>{{end}}
<table class="rollouts">
<thead><tr><th>rollout</th><th>score</th>{{range .Breakdown}}<th>{{.}}</th>{{end}}<th>tokens</th><th>generated</th><th>scored</th><th>outside top-K</th><th>hints</th><th>mean Δ logprob (in top-K)</th>{{range .Info}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Seqs}}
<tr data-seq="{{.Index}}"><td><a href="#seq-{{$.Index}}-{{.Index}}">{{.Label}}</a></td><td class="score">{{.Score}}</td>{{range .Breakdown}}<td class="term">{{.}}</td>{{end}}<td class="tokens">{{.Tokens}}</td><td class="generated">{{.Generated}}</td><td class="scored">{{.Scored}}</td><td class="outside">{{.Outside}}</td><td class="hints"{{if eq .Hints "–"}} title="not in the source: JSON Lines of groups carry no hints"{{end}}>{{.Hints}}</td><td class="delta">{{.Delta}}</td>{{range .Info}}<td>{{.}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
{{- if .Metrics}}
<div class="metrics">
{{- range .Metrics}}<div class="metric"><span class="name">{{.Name}}</span> <span class="value">{{.Value}}</span></div>{{end}}
</div>
{{- end}}
{{- range .Seqs}}
<details class="seq" id="seq-{{$.Index}}-{{.Index}}" data-group="{{$.Index}}" data-seq="{{.Index}}">
<summary>{{.Label}}: score {{.Score}}, {{.Tokens}} tokens, {{.Scored}} scored ({{.Outside}} outside the teacher's top-K), {{if eq .Hints "–"}}hints unknown{{else}}{{.Hints}} hints{{end}}</summary>
<div class="toks"></div>
</details>
{{- end}}
<script type="application/json" class="group-data" id="data-{{.Index}}">{{.Data}}</script>
</section>
{{end}}

{{- define "tail" -}}
</main>
{{- if .Failed}}
<section class="status failed" id="run-failed" role="alert">
<h2>The run failed</h2>
<p class="reason">{{.Failed}}</p>
<p>Groups written before it failed, all on this page: {{.Groups}}.</p>
</section>
{{- else}}
<style>#run-status .incomplete { display: none; }</style>
{{- end}}
<div id="tip" hidden></div>
<script type="application/json" id="vocab">{{.Vocab}}</script>
<script>{{.JS}}</script>
</body>
</html>
{{end}}`))

type seqView struct {
	Index                              int
	Label, Score, Delta, Hints         string // Hints is "–" when unknown
	Tokens, Generated, Scored, Outside int
	Breakdown, Info                    []string
}

type groupMetric struct{ Name, Value string }

type groupPage struct {
	Index           int
	Title, Note     string
	Breakdown, Info []string
	Seqs            []seqView
	Metrics         []groupMetric
	Data            template.JS
}

// names returns the names of terms in the order they first appear.
func names(seqs []encodedSeq, get func(*encodedSeq) []Term) []string {
	var out []string
	for i := range seqs {
		for _, t := range get(&seqs[i]) {
			if !slices.Contains(out, t.Name) {
				out = append(out, t.Name)
			}
		}
	}
	return out
}

// values returns the values of terms in the order of names ("" for a missing name).
func values(terms []Term, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		for _, t := range terms {
			if t.Name == n {
				out[i] = t.Value
			}
		}
	}
	return out
}

// Num formats a number as the page shows it.
func num(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// hintCount is the page's hint count of s: "–" when its source does not say.
func hintCount(s *encodedSeq) string {
	if s.hintsUnknown {
		return "–"
	}
	return strconv.Itoa(len(s.hints))
}

func groupView(index int, g Group, seqs []encodedSeq, data template.JS) groupPage {
	p := groupPage{Index: index, Title: g.Title, Note: g.Note, Data: data,
		Breakdown: names(seqs, func(s *encodedSeq) []Term { return s.breakdown }),
		Info:      names(seqs, func(s *encodedSeq) []Term { return s.info }),
	}
	if p.Title == "" {
		p.Title = fmt.Sprintf("group %d", index)
	}
	for i := range seqs {
		s := &seqs[i]
		p.Seqs = append(p.Seqs, seqView{
			Index: i, Label: s.label, Score: num(s.score), Delta: num(s.figures.MeanDelta),
			Tokens: len(s.tokens), Generated: s.generated, Scored: s.figures.Scored, Outside: s.figures.OutsideTopK,
			Hints:     hintCount(s),
			Breakdown: values(s.breakdown, p.Breakdown), Info: values(s.info, p.Info),
		})
	}
	for _, k := range slices.Sorted(maps.Keys(g.Metrics)) {
		p.Metrics = append(p.Metrics, groupMetric{k, strconv.FormatFloat(g.Metrics[k], 'g', 6, 64)})
	}
	return p
}

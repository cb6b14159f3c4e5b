package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/report"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// chromium returns a headless Chromium context on a fresh profile. Without a
// Chromium binary the test is skipped, unless AGENTICOPD_REQUIRE_CHROMIUM is set (as
// test.sh does), when it fails.
func chromium(tb testing.TB) context.Context {
	tb.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("AGENTICOPD_REQUIRE_CHROMIUM") != "" {
			tb.Fatal("chromium not found: apt-get install -y --no-install-recommends chromium")
		}
		tb.Skip("chromium not found (./test.sh installs it)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	tb.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// writePage writes a page of groups to a file and returns its file:// URL.
func writePage(tb testing.TB, opts report.Options, groups ...report.Group) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "report.html")
	var buf bytes.Buffer
	require.NoError(tb, report.Write(context.Background(), &buf, opts, groups...))
	require.NoError(tb, os.WriteFile(path, buf.Bytes(), 0o644))
	return "file://" + path
}

func TestChromiumRendersTheReport(t *testing.T) {
	ctx := chromium(t)
	sim := vllmtest.NewServer(t)
	g := synthGroup(7, "browser", 3, 2500, sim.VocabSize(), 20)
	url := writePage(t, report.Options{TopK: 8, Detokenizer: sim.Client()}, g)

	wantScored, wantTokens, wantHints := 0, 0, 0
	for _, s := range g.Sequences {
		wantTokens += len(s.Tokens)
		wantHints += len(s.Hints)
		for p := range s.Tokens {
			if ids, _ := s.Rows.Row(p); len(ids) > 0 {
				wantScored++
			}
		}
	}

	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
		require.NoError(t, err)
		return n
	}
	// Before a rollout is opened, no token is rendered (lazy).
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`html[data-ready="1"]`)),
	))
	assert.Zero(t, count(".toks .t"), "tokens are rendered on demand")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#seq-0-0 > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#seq-0-0 .toks .t`)),
	))
	assert.Equal(t, 2000, count("#seq-0-0 .toks .t"), "one chunk at first")

	_, err := chromedp.Run(ctx, chromedp.Evaluate[int](`opdReport.renderAll(); 0`))
	require.NoError(t, err)
	scored, tokens, hints := count(".toks .t.s"), count(".toks .t"), count(".toks .hint")
	assert.Equal(t, wantScored, scored, "scored cells")
	assert.Equal(t, wantTokens, tokens, "token cells")
	assert.Equal(t, wantHints, hints, "hint blocks")

	// Hover the first scored cell of rollout 1: the tooltip lists the teacher's top-K
	// of that position, in rank order, with the server's token text.
	var cell struct {
		P    int
		X, Y float64
	}
	box, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function(){ var e = document.querySelector('#seq-0-1 .toks .t.s');
			e.scrollIntoView({block: 'center'}); var r = e.getBoundingClientRect();
			return [+e.dataset.p, r.left + r.width/2, r.top + r.height/2]; })()`))
	require.NoError(t, err)
	require.Len(t, box, 3)
	cell.P, cell.X, cell.Y = int(box[0]), box[1], box[2]
	require.NoError(t, chromedp.Do(ctx, chromedp.MouseEvent(chromedp.MouseMoved, cell.X, cell.Y)))
	tipHidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('tip').hidden`))
	require.NoError(t, err)
	tipRows, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll('#tip table.topk tr')).slice(1).map(function(tr){
			return Array.from(tr.cells).map(function(td){ return td.textContent; }); })`))
	require.NoError(t, err)
	assert.False(t, tipHidden, "the tooltip shows")
	ids, lps := g.Sequences[1].Rows.Row(cell.P)
	require.NotEmpty(t, ids)
	require.Len(t, tipRows, min(8, len(ids)))
	for i, r := range tipRows {
		require.Len(t, r, 4)
		assert.Equal(t, strconv.Itoa(i+1), r[0])
		assert.Equal(t, strconv.Itoa(int(ids[i])), r[2])
		assert.Equal(t, fmt.Sprintf("%.3f", float64(q(float64(lps[i])))/-1000), r[3])
		text, err := sim.Client().Detokenize(context.Background(), []int32{ids[i]})
		require.NoError(t, err)
		var shown string
		require.NoError(t, json.Unmarshal([]byte(r[1]), &shown), "the token text is shown as a JSON string")
		assert.Equal(t, text, shown, "the server's text of id %d", ids[i])
	}

	// A screenshot that is not blank: many pixels differ from the background.
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err)
	bounds := img.Bounds()
	nonWhite, colours := 0, map[[3]uint32]bool{}
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
			if r < 0xf000 || g < 0xf000 || b < 0xf000 {
				nonWhite++
			}
		}
	}
	total := bounds.Dx() * bounds.Dy() / 4
	t.Logf("screenshot %dx%d: %.1f%% non-white, %d colours", bounds.Dx(), bounds.Dy(), 100*float64(nonWhite)/float64(total), len(colours))
	assert.Greater(t, nonWhite, total/50, "more than 2%% of the screenshot is not white")
	assert.Greater(t, len(colours), 20, "heat colours and text")
	if dir := os.Getenv("AGENTICOPD_SCREENSHOT_DIR"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "report.png"), shot, 0o644))
	}
}

// BenchmarkChromiumLoad8x16k loads a page of 8 rollouts of 16k tokens (every position
// scored, 50 teacher entries) in headless Chromium: ms/load is navigation until the
// script is ready, as the test sees it; ms/dom-content-loaded and ms/load-event are the
// page's own Navigation Timing; ms/render-all is opening and rendering every rollout's
// tokens.
func BenchmarkChromiumLoad8x16k(b *testing.B) {
	ctx := chromium(b)
	url := writePage(b, report.Options{Detokenizer: fakeDetok{}}, big())
	for b.Loop() {
		start := time.Now()
		if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`html[data-ready="1"]`))); err != nil {
			b.Fatal(err)
		}
		load := time.Since(start)
		nav, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(function(){ var n = performance.getEntriesByType('navigation')[0];
			return [n.domContentLoadedEventEnd, n.loadEventEnd]; })()`))
		if err != nil || len(nav) != 2 {
			b.Fatal(err, nav)
		}
		start = time.Now()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`opdReport.renderAll(); document.querySelectorAll('.toks .t').length`))
		if err != nil {
			b.Fatal(err)
		}
		render := time.Since(start)
		if n != 8*16384 {
			b.Fatalf("%d token cells, want %d", n, 8*16384)
		}
		b.ReportMetric(float64(load.Milliseconds()), "ms/load")
		b.ReportMetric(nav[0], "ms/dom-content-loaded")
		b.ReportMetric(nav[1], "ms/load-event")
		b.ReportMetric(float64(render.Milliseconds()), "ms/render-all")
	}
}

// TestChromiumShowsOutsideTopKAsSuch: a fixture whose sampled tokens at positions 5
// and 7 are outside the teacher's top-6, with the rows' bound above the student's
// logprob there (a colour taken from the bound would read "teacher > student" where
// the teacher likes the token least). Both the in-memory form (exact teacher
// logprobs given, as the quickstart's page has them) and the JSON Lines form (as
// examples/inspect reads them) must render those positions as outside the top-K, with
// no heat colour, and a tooltip that says so and how many of the row's entries it
// shows.
func TestChromiumShowsOutsideTopKAsSuch(t *testing.T) {
	ctx := chromium(t)
	mem := outsideSeq()
	file := viaJSONL(t, mem, false)
	file.Label = "from JSON Lines"
	url := writePage(t, report.Options{TopK: 4, Detokenizer: fakeDetok{}}, report.Group{Title: "outside", Sequences: []report.Sequence{mem, file}})
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`html[data-ready="1"]`)),
	))
	_, err := chromedp.Run(ctx, chromedp.Evaluate[int](`opdReport.renderAll(); 0`))
	require.NoError(t, err)

	type cell struct {
		P          int
		Outside    bool
		Background string // the inline heat colour, "" for none
		Image      string // the computed background image (the outside pattern)
	}
	for si, name := range []string{"in memory", "from JSON Lines"} {
		t.Run(name, func(t *testing.T) {
			cells, err := chromedp.Run(ctx, chromedp.Evaluate[[]cell](fmt.Sprintf(`Array.from(document.querySelectorAll('#seq-0-%d .toks .t.s')).map(function(e){
				return {P: +e.dataset.p, Outside: e.classList.contains('o'), Background: e.style.background,
					Image: getComputedStyle(e).backgroundImage}; })`, si)))
			require.NoError(t, err)
			require.Len(t, cells, len(outsideEntries), "every scored position is drawn as scored")
			for i, e := range outsideEntries {
				c := cells[i]
				require.Equal(t, e.pos, c.P)
				if e.inside {
					assert.False(t, c.Outside, "position %d is in the top-K", e.pos)
					var r, g, b int
					var a float64
					_, err := fmt.Sscanf(c.Background, "rgba(%d, %d, %d, %g)", &r, &g, &b, &a)
					require.NoError(t, err, "position %d: heat colour %q", e.pos, c.Background)
					assert.Equal(t, e.exact > e.student, b > r, "position %d: blue for Δ %.1f > 0, red below", e.pos, e.exact-e.student)
					continue
				}
				assert.True(t, c.Outside, "position %d is outside the teacher's top-K", e.pos)
				assert.Empty(t, c.Background, "position %d: no heat colour from a bound", e.pos)
				assert.Contains(t, c.Image, "repeating-linear-gradient", "position %d has the outside colour", e.pos)
			}

			tip := func(p int) string {
				t.Helper()
				xy, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](fmt.Sprintf(`(function(){ var e = document.querySelector('#seq-0-%d .toks .t[data-p="%d"]');
					e.scrollIntoView({block: 'center'}); var r = e.getBoundingClientRect();
					return [r.left + r.width/2, r.top + r.height/2]; })()`, si, p)))
				require.NoError(t, err)
				require.NoError(t, chromedp.Do(ctx, chromedp.MouseEvent(chromedp.MouseMoved, xy[0], xy[1])))
				text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('tip').hidden ? '' : document.getElementById('tip').textContent`))
				require.NoError(t, err)
				return text
			}
			got := tip(5)
			assert.Contains(t, got, "outside the teacher’s top-K (rank > 6), logprob ≤ -1.000")
			assert.Contains(t, got, "the teacher’s top-K: 4 of 6 entries shown")
			if si == 0 {
				assert.Contains(t, got, "given apart from the rows: -9.000, Δ -6.000", "the exact value where it is known")
			} else {
				assert.NotContains(t, got, "given apart from the rows")
			}
			got = tip(8)
			assert.Contains(t, got, "teacher logprob -2.500 (rank > 4, in the top 6), Δ -1.500")
			got = tip(6)
			assert.Contains(t, got, "teacher logprob -0.800 (rank 3), Δ -0.600")
		})
	}
}

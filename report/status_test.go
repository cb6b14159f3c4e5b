package report_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/report"
)

// pages returns a page of one group three ways: closed, closed as a failed run (with
// reason), and cut where a program killed before Close leaves it (everything the
// groups wrote, no tail).
func pages(t *testing.T, reason string) (closed, failed, cut string) {
	t.Helper()
	g := synthGroup(3, "status", 2, 40, 500, 5)
	write := func(finish func(*report.Writer) error) string {
		var buf bytes.Buffer
		w, err := report.NewWriter(&buf, report.Options{})
		require.NoError(t, err)
		require.NoError(t, w.Add(context.Background(), g))
		require.NoError(t, finish(w))
		return buf.String()
	}
	closed = write((*report.Writer).Close)
	failed = write(func(w *report.Writer) error { return w.CloseWithError(errors.New(reason)) })
	i := strings.LastIndex(closed, "</main>")
	require.Positive(t, i)
	return closed, failed, closed[:i]
}

func TestAFailedRunClosesItsPageAndSaysWhy(t *testing.T) {
	reason := "agenticopd: process: 1 of 3 groups written; last failure: dial tcp 127.0.0.1:9: connect: connection refused"
	closed, failed, _ := pages(t, reason)
	for name, page := range map[string]string{"closed": closed, "failed": failed} {
		assert.True(t, strings.HasSuffix(strings.TrimSpace(page), "</html>"), "%s: the page is closed", name)
		assert.Contains(t, page, `<script type="application/json" id="vocab">`, "%s: the token texts are written", name)
	}
	assert.Contains(t, failed, "The run failed")
	assert.Contains(t, failed, "connect: connection refused", "the reason")
	assert.Contains(t, failed, "Groups written before it failed, all on this page: 1.")
	assert.NotContains(t, closed, "The run failed")

	// After a failed Add the page can still be closed as failed, and says why.
	var buf bytes.Buffer
	w, err := report.NewWriter(&buf, report.Options{})
	require.NoError(t, err)
	bad := synthGroup(4, "bad", 1, 10, 500, 5)
	bad.Sequences[0].Masked = []bool{true} // a per-token slice of the wrong length
	require.Error(t, w.Add(context.Background(), bad))
	require.Error(t, w.Close(), "Close reports the failed Add")
	require.NoError(t, w.CloseWithError(errors.New("the page stopped at group 0")))
	assert.Contains(t, buf.String(), "the page stopped at group 0")
	assert.True(t, strings.HasSuffix(strings.TrimSpace(buf.String()), "</html>"))
	assert.ErrorIs(t, w.CloseWithError(errors.New("again")), report.ErrClosed)
}

// TestChromiumShowsWhetherThePageIsComplete: a page cut before Close says at its top
// that it is incomplete; a closed page does not; a failed run's page says at its top
// that the run failed, and why.
func TestChromiumShowsWhetherThePageIsComplete(t *testing.T) {
	ctx := chromium(t)
	reason := "policy: connection refused"
	closed, failed, cut := pages(t, reason)
	dir := t.TempDir()
	type view struct {
		Incomplete, Failed bool
		Top                string
	}
	look := func(name, page string) view {
		t.Helper()
		path := filepath.Join(dir, name+".html")
		require.NoError(t, os.WriteFile(path, []byte(page), 0o644))
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+path), chromedp.WaitReady(chromedp.CSS("body"))))
		v, err := chromedp.Run(ctx, chromedp.Evaluate[view](`(function(){
			var shown = function(e) { return !!e && e.getClientRects().length > 0; };
			var status = document.getElementById('run-status');
			return {Incomplete: shown(status.querySelector('.incomplete')),
				Failed: shown(status.querySelector('#run-failed')), Top: status.innerText};
		})()`))
		require.NoError(t, err)
		return v
	}
	assert.Equal(t, view{Incomplete: true, Top: look("cut", cut).Top}, look("cut", cut))
	assert.Contains(t, look("cut", cut).Top, "This page is incomplete")
	assert.Equal(t, view{}, look("closed", closed))
	f := look("failed", failed)
	assert.False(t, f.Incomplete)
	assert.True(t, f.Failed, "the failure is at the top")
	assert.Contains(t, f.Top, "The run failed")
	assert.Contains(t, f.Top, reason)
}

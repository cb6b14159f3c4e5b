package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// dyingServer is the scripted student and judge on a vllmtest server (real HTTP on
// loopback) that the test closes mid-run: a server that died. onTurn, when not nil,
// sees each agent turn before the student answers it.
func dyingServer(t *testing.T, onTurn func(*vllmtest.Server, vllmtest.ScriptInput)) *vllmtest.Server {
	t.Helper()
	student := &scripted.Student{}
	var sim *vllmtest.Server
	sim = vllmtest.NewServer(t,
		vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
			if onTurn != nil {
				onTurn(sim, in)
			}
			return student.Turn(in)
		}),
		vllmtest.WithChatScript(scripted.Judge), vllmtest.WithMaxLogprobs(20))
	return sim
}

// onFirstTurn is an onTurn that calls f at the first agent turn only.
func onFirstTurn(f func(*vllmtest.Server)) func(*vllmtest.Server, vllmtest.ScriptInput) {
	var once sync.Once
	return func(s *vllmtest.Server, _ vllmtest.ScriptInput) { once.Do(func() { f(s) }) }
}

// dieAfterFirstGroup is the program's stdout: when the first group's line is
// printed (Process prints it after writing the group), it closes the server. Until
// then the agent turns of a third task wait (hold), so that only the first two
// groups (the two collected at once) can be written, however slowly the first
// one's line comes.
type dieAfterFirstGroup struct {
	sim     *vllmtest.Server
	printed chan struct{} // closed at the first group's line

	mu    sync.Mutex
	buf   bytes.Buffer
	dead  bool
	tasks []string // the tasks' prompts, in the order their first turns came
}

func newDieAfterFirstGroup(t *testing.T) *dieAfterFirstGroup {
	w := &dieAfterFirstGroup{printed: make(chan struct{})}
	w.sim = dyingServer(t, w.hold)
	return w
}

// hold lets the turns of the first two tasks through and makes any other wait for
// the first group's line; the server is closed by then, so that turn's group fails.
func (w *dieAfterFirstGroup) hold(_ *vllmtest.Server, in vllmtest.ScriptInput) {
	task := ""
	for _, m := range in.Messages {
		if m.Role == chat.RoleUser {
			task = m.Content
			break
		}
	}
	w.mu.Lock()
	i := slices.Index(w.tasks, task)
	if i < 0 {
		i = len(w.tasks)
		w.tasks = append(w.tasks, task)
	}
	w.mu.Unlock()
	if i >= 2 {
		<-w.printed
	}
}

// Write keeps p; at the first group's line it closes the server before it returns
// (not under w.mu: Close waits for the turns in flight, which take it).
func (w *dieAfterFirstGroup) Write(p []byte) (int, error) {
	w.mu.Lock()
	first := !w.dead && bytes.Contains(p, []byte("\ngroup: task "))
	w.dead = w.dead || first
	n, err := w.buf.Write(p)
	w.mu.Unlock()
	if first {
		close(w.printed)
		w.sim.Close()
	}
	return n, err
}

func (w *dieAfterFirstGroup) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// closedPage checks that the page at path is closed and says the run failed, with
// the reason.
func closedPage(t *testing.T, path string) string {
	t.Helper()
	page, err := os.ReadFile(path)
	require.NoError(t, err, "the page is kept")
	text := string(page)
	assert.True(t, strings.HasSuffix(strings.TrimSpace(text), "</html>"), "the page is closed")
	assert.Contains(t, text, `id="vocab"`, "the token texts are written")
	assert.Contains(t, text, "The run failed")
	assert.Contains(t, text, "groups written", "the reason is on the page")
	return text
}

func TestQuickstartServerDiesMidRun(t *testing.T) {
	w := newDieAfterFirstGroup(t)
	dir := t.TempDir()
	// The first two groups are collected at once (MaxGroups); the others wait for
	// the first group's line, and then the server is dead: 1 or 2 are written.
	err := run(context.Background(), []string{"-out", dir, "-groups", "4", "-topk", "20", "-vllm-url", w.sim.URL}, w)
	require.Error(t, err)
	out := w.String()
	msg := err.Error()
	assert.Contains(t, msg, "groups written; last failure:", "the error says why")
	assert.Regexp(t, `\n[12] of 4 groups were written to \S+groups.jsonl; \S+report.html says the run failed`, msg)

	// The program logged the failures as they happened, as serve does.
	assert.Contains(t, out, "level=WARN msg=\"group failed\"")
	// groups.jsonl holds the groups written before, each whole and valid.
	f, err := os.Open(filepath.Join(dir, "groups.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	written := 0
	require.NoError(t, atropos.ReadJSONL(f, func(g *atropos.ScoredDataGroup) error {
		written++
		return g.Validate(atropos.ValidateOptions{})
	}))
	assert.Equal(t, strings.Count(out, "\ngroup: task "), written)
	page := closedPage(t, filepath.Join(dir, "report.html"))
	// The page's token text comes from the server too: a group whose detokenize
	// requests failed is not on it, and the page says where it stopped.
	if onPage := strings.Count(page, `<section class="group"`); onPage < written {
		assert.Contains(t, page, "the page stopped after")
	} else {
		assert.Equal(t, written, onPage)
	}
}

func TestQuickstartServerDiesAtOnce(t *testing.T) {
	// The server dies during the first generation: no group can be written.
	sim := dyingServer(t, onFirstTurn(func(s *vllmtest.Server) { go s.Close() }))
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"-out", dir, "-groups", "2", "-topk", "20", "-vllm-url", sim.URL}, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "0 of 2 groups written; last failure:")
	assert.Contains(t, err.Error(), "no group was written (the empty "+filepath.Join(dir, "groups.jsonl")+" was removed)")
	assert.NoFileExists(t, filepath.Join(dir, "groups.jsonl"), "no empty output is left")
	page := closedPage(t, filepath.Join(dir, "report.html"))
	assert.Contains(t, page, "Groups written before it failed, all on this page: 0.")
	assert.Contains(t, out.String(), "level=WARN msg=\"group failed\"")
}

func TestQuickstartInterruptedClosesThePage(t *testing.T) {
	// SIGINT ends run's ctx: here at the first generation.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim := dyingServer(t, onFirstTurn(func(*vllmtest.Server) { cancel() }))
	dir := t.TempDir()
	var out bytes.Buffer
	err := run(ctx, []string{"-out", dir, "-groups", "2", "-topk", "20", "-vllm-url", sim.URL}, &out)
	require.ErrorIs(t, err, context.Canceled)
	page, rerr := os.ReadFile(filepath.Join(dir, "report.html"))
	require.NoError(t, rerr)
	assert.Contains(t, string(page), "The run failed")
	assert.Contains(t, string(page), "stopped by its caller before all groups were written")
	assert.NoFileExists(t, filepath.Join(dir, "groups.jsonl"))
}

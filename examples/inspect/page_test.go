package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
)

// table is a page's rollout tables: per group, the header and each row's cells.
type table struct {
	header []string
	rows   [][]string
}

var (
	sectionRE = regexp.MustCompile(`(?s)<table class="rollouts">(.*?)</table>`)
	thRE      = regexp.MustCompile(`<th>([^<]*)</th>`)
	trRE      = regexp.MustCompile(`(?s)<tr data-seq="\d+">(.*?)</tr>`)
	tdRE      = regexp.MustCompile(`<td[^>]*>(?:<a [^>]*>)?([^<]*)(?:</a>)?</td>`)
)

func tables(t *testing.T, page string) []table {
	t.Helper()
	var out []table
	for _, sec := range sectionRE.FindAllStringSubmatch(page, -1) {
		var tb table
		for _, m := range thRE.FindAllStringSubmatch(sec[1], -1) {
			tb.header = append(tb.header, m[1])
		}
		for _, tr := range trRE.FindAllStringSubmatch(sec[1], -1) {
			var row []string
			for _, td := range tdRE.FindAllStringSubmatch(tr[1], -1) {
				row = append(row, td[1])
			}
			require.Len(t, row, len(tb.header), "a cell per column")
			tb.rows = append(tb.rows, row)
		}
		out = append(out, tb)
	}
	return out
}

// TestInspectPageMatchesThePageFromMemory: groups collected by Env.Process (the
// scripted student and judge on the simulator, so that some rollouts have hints) are
// written as JSON Lines and, from memory, as Process's page; inspect's page of the
// JSON Lines shows, in every column it has, what the page from memory shows, except
// the hint count, which JSON Lines do not carry: it is unknown ("–"), never 0.
func TestInspectPageMatchesThePageFromMemory(t *testing.T) {
	ctx := context.Background()
	sim, err := scripted.Start(20)
	require.NoError(t, err)
	defer sim.Close()
	sandboxes, err := cli.Sandbox(ctx, true, io.Discard)
	require.NoError(t, err)
	dir := t.TempDir()
	memPage := filepath.Join(dir, "memory.html")
	env, err := agenticopd.NewEnv(agenticopd.Config{Policy: sim.Client(), DistillTopK: 20, SandboxFactory: sandboxes, ReportPath: memPage})
	require.NoError(t, err)
	var jsonl bytes.Buffer
	require.NoError(t, env.Process(ctx, 2, &jsonl))
	in := filepath.Join(dir, "groups.jsonl")
	require.NoError(t, os.WriteFile(in, jsonl.Bytes(), 0o644))
	filePage := filepath.Join(dir, "file.html")
	require.NoError(t, run(ctx, []string{"-in", in, "-html", filePage, "-simulator"}, io.Discard))

	read := func(path string) []table {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return tables(t, string(b))
	}
	mem, file := read(memPage), read(filePage)
	require.Len(t, file, 2)
	require.Len(t, mem, len(file))
	hinted := 0
	for g := range file {
		require.Len(t, file[g].rows, len(mem[g].rows), "group %d", g)
		memCol := map[string]int{}
		for i, h := range mem[g].header {
			memCol[h] = i
		}
		for i, h := range file[g].header {
			j, ok := memCol[h]
			require.True(t, ok, "column %q of the file's page is on the page from memory", h)
			for r := range file[g].rows {
				got, want := file[g].rows[r][i], mem[g].rows[r][j]
				switch h {
				case "rollout": // "sequence r" and "rollout r": the JSON Lines carry no label
					assert.True(t, strings.HasSuffix(got, " "+strings.Fields(want)[1]), "group %d row %d: %q vs %q", g, r, got, want)
				case "hints":
					assert.Equal(t, "–", got, "group %d row %d: the hint count is unknown, not 0", g, r)
					if want != "0" {
						hinted++
					}
				default:
					assert.Equal(t, want, got, "group %d row %d, column %q", g, r, h)
				}
			}
		}
	}
	require.Positive(t, hinted, "some rollouts had hints, so the column matters")
}

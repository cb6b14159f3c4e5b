package agenticopd_test

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/internal/testctx"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// logBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeStopsAfterGroupsDroppedInARow serves tasks without tests (every rollout
// scores the same, as with a policy that never solves): every group is dropped, and
// Serve must neither loop silently nor send anything.
func TestServeStopsAfterGroupsDroppedInARow(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		cancelAt  int64 // cancel Serve after this many groups (0: never)
		wantErr   bool
		wantWarns []string // in_a_row of each warning
	}{
		{name: "stops at the limit", limit: 3, wantErr: true},
		{name: "warns at 10 and 20 before stopping at 25", limit: 25, wantErr: true, wantWarns: []string{"10", "20"}},
		{name: "negative never stops, still warns", limit: -1, cancelAt: 45, wantWarns: []string{"10", "20", "40"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(testctx.Context(t))
			defer cancel()
			sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(answerScript(tc.name)))
			api := atropostest.NewServer(t)
			var log logBuffer
			var groups, dropped atomic.Int64
			env := fastEnv(t, sim.Client(), func(c *agenticopd.Config) {
				c.KeepEqualScores = false
				c.MaxDroppedInARow = tc.limit
				c.MaxGroups = 1 // one group at a time: the count at the stop is exact
				c.Logger = slog.New(slog.NewTextHandler(&log, nil))
				c.OnGroup = func(g *agenticopd.Group) {
					if g.Dropped != "" {
						dropped.Add(1)
					}
					if groups.Add(1) == tc.cancelAt {
						cancel()
					}
				}
			})
			train(ctx, t, api, 1000)
			err := env.Serve(ctx, fastClient(t, api.URL(), t.TempDir(), nil))
			if tc.wantErr {
				require.ErrorIs(t, err, agenticopd.ErrDroppedInARow)
				assert.Contains(t, err.Error(), "scores_equal: ")
				assert.Contains(t, err.Error(), "tasks without tests")
				assert.EqualValues(t, tc.limit, dropped.Load(), "Serve stops at the limit")
			} else {
				require.ErrorIs(t, err, context.Canceled)
			}
			assert.Equal(t, groups.Load(), dropped.Load(), "every group was dropped")
			assert.Empty(t, api.Received(), "nothing sent")
			var warns []string
			for _, m := range regexp.MustCompile(`level=WARN msg="groups dropped in a row, none sent" in_a_row=(\d+)`).FindAllStringSubmatch(log.String(), -1) {
				warns = append(warns, m[1])
			}
			if diff := cmp.Diff(tc.wantWarns, warns); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

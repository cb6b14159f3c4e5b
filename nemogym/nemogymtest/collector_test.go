package nemogymtest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
)

// An agent whose first connection drops after it read the /run: NeMo Gym's client
// sends it again, so the agent sees the same row twice.
func TestCollectorRetriesDroppedConnections(t *testing.T) {
	for _, retry := range []bool{true, false} {
		var seen atomic.Int64
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			if seen.Add(1) == 1 {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			_, _ = io.WriteString(w, `{"reward":1}`)
		}))
		tr := &http.Transport{DisableKeepAlives: true}
		c := nemogymtest.Collector{AgentURL: hs.URL, Driver: nemogymtest.Standalone, RetryTransport: retry, HTTPClient: &http.Client{Transport: tr}}
		runs, _, err := c.Run(context.Background(), []map[string]any{{"responses_create_params": map[string]any{}}}, 1)
		if retry {
			require.NoError(t, err)
			require.Len(t, runs, 1)
			require.EqualValues(t, 2, seen.Load(), "the agent got the row twice")
		} else {
			var re *nemogymtest.RunError
			require.True(t, errors.As(err, &re), "%v", err)
			require.Equal(t, nemogymtest.Infra, re.Class)
		}
		tr.CloseIdleConnections()
		hs.Close()
	}
}

// Under the standalone driver any non-2xx aborts the run; a 200 failure row is a
// failure, not a result.
func TestCollectorStandaloneFailures(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"reward":0,"_ng_failure_class":"rollout_failed","error":"x"}`)
	}))
	defer hs.Close()
	c := nemogymtest.Collector{AgentURL: hs.URL, Driver: nemogymtest.Standalone}
	runs, failures, err := c.Run(context.Background(), []map[string]any{{"responses_create_params": map[string]any{}}}, 2)
	require.NoError(t, err)
	require.Empty(t, runs)
	require.Len(t, failures, 2)
}

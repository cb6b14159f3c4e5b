package nemogym

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// An answer written over HTTP/1 goes back to the free buffers, and one written over
// HTTP/2 (whose writes may return while a frame still reads the bytes) does not.
func TestServerReusesOnlyBuffersWrittenOverHTTP1(t *testing.T) {
	out := syntheticOutcome(2, 30, 10, 5, 4, 2)
	s, err := NewServer(Config{Runner: RunnerFunc(func(context.Context, tasks.Task) (Outcome, error) { return out, nil })})
	require.NoError(t, err)
	defer s.Wait()
	for _, tc := range []struct {
		name     string
		major    int
		row      string
		wantFree int
	}{
		{"HTTP/2", 2, `{"responses_create_params":{"input":"q"},"task":{"statement":"s"}}`, 0},
		{"HTTP/2, kept", 2, `{"responses_create_params":{"input":"q"},"task":{"statement":"s"},"_ng_task_index":0,"_ng_rollout_index":0}`, 0},
		{"HTTP/1", 1, `{"responses_create_params":{"input":"q"},"task":{"statement":"s"}}`, 1},
	} {
		req := httptest.NewRequest(http.MethodPost, "/run", strings.NewReader(tc.row))
		req.ProtoMajor = tc.major
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, tc.name)
		s.mu.Lock()
		free := len(s.free)
		s.mu.Unlock()
		require.Equal(t, tc.wantFree, free, tc.name)
	}
	// The kept answer, written over HTTP/2 when it was made, stays out of the free
	// buffers when it is let go.
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.done {
		require.False(t, a.pooled)
	}
}

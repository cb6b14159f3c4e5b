package vllmtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestRequestsRecorded(t *testing.T) {
	s := vllmtest.NewServer(t)
	get(t, s.URL+"/health")
	post(t, s.URL+"/tokenize", map[string]any{"prompt": "hi"})
	post(t, s.URL+"/tokenize", map[string]any{"prompt": 3})

	require.Equal(t, 3, s.RequestCount(""))
	require.Equal(t, 2, s.RequestCount("/tokenize"))
	require.Equal(t, 0, s.RequestCount("/v1/completions"))
	reqs := s.Requests()
	require.Len(t, reqs, 3)
	require.Equal(t, http.MethodGet, reqs[0].Method)
	require.Equal(t, "/health", reqs[0].Path)
	require.Equal(t, 200, reqs[0].Status)
	require.Equal(t, "hi", reqs[1].JSON["prompt"])
	require.JSONEq(t, `{"prompt":"hi"}`, string(reqs[1].Body))
	require.Equal(t, 200, reqs[1].Status)
	require.Equal(t, 400, reqs[2].Status)
	require.False(t, reqs[2].Fault)

	s.ResetRequests()
	require.Zero(t, s.RequestCount(""))
	require.Empty(t, s.Requests())
}

func TestFaultStatus(t *testing.T) {
	s := vllmtest.NewServer(t)
	s.FailNext("/tokenize", 2, http.StatusServiceUnavailable, "")
	for range 2 {
		status, raw := post(t, s.URL+"/tokenize", map[string]any{"prompt": "hi"})
		require.Equal(t, http.StatusServiceUnavailable, status)
		var e apiError
		require.NoError(t, json.Unmarshal(raw, &e))
		require.Equal(t, "injected fault", e.Error.Message)
		require.Equal(t, 503, e.Error.Code)
	}
	status, _ := post(t, s.URL+"/tokenize", map[string]any{"prompt": "hi"})
	require.Equal(t, http.StatusOK, status, "the fault fired its two times")
	status, _ = get(t, s.URL+"/health")
	require.Equal(t, http.StatusOK, status, "other paths are untouched")

	remove := s.SetError("/health", http.StatusInternalServerError, `{"detail":"boom"}`)
	for range 3 {
		status, raw := get(t, s.URL+"/health")
		require.Equal(t, http.StatusInternalServerError, status)
		require.JSONEq(t, `{"detail":"boom"}`, string(raw))
	}
	remove()
	status, _ = get(t, s.URL+"/health")
	require.Equal(t, http.StatusOK, status)
	reqs := s.Requests()
	require.True(t, reqs[0].Fault)
	require.Equal(t, http.StatusServiceUnavailable, reqs[0].Status)
}

func TestFaultEveryNth(t *testing.T) {
	s := vllmtest.NewServer(t)
	s.AddFault(vllmtest.Fault{Every: 3, Status: http.StatusTooManyRequests})
	var got []int
	for range 7 {
		status, _ := get(t, s.URL+"/health")
		got = append(got, status)
	}
	require.Equal(t, []int{200, 200, 429, 200, 200, 429, 200}, got)
	s.ClearFaults()
	status, _ := get(t, s.URL+"/health")
	require.Equal(t, 200, status)
}

func TestFaultMalformed(t *testing.T) {
	s := vllmtest.NewServer(t)
	s.AddFault(vllmtest.Fault{Path: "/v1/completions", Malformed: true, Times: 1})
	status, raw := post(t, s.URL+"/v1/completions", map[string]any{"prompt": "x"})
	require.Equal(t, http.StatusOK, status)
	require.False(t, json.Valid(raw))

	_, err := s.Client(vllm.WithRetryMax(0)).Completions(context.Background(), vllm.CompletionRequest{Prompts: [][]int32{{1, 2}}, MaxTokens: 1})
	require.NoError(t, err, "the fault fired once only")
}

func TestFaultDrop(t *testing.T) {
	s := vllmtest.NewServer(t)
	s.AddFault(vllmtest.Fault{Path: "/health", Drop: true, Times: 1})
	resp, err := http.Get(s.URL + "/health")
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err)
	require.Equal(t, 0, s.Requests()[0].Status)
	require.True(t, s.Requests()[0].Fault)
	status, _ := get(t, s.URL+"/health")
	require.Equal(t, 200, status)
}

func TestFaultDelayHonoursContext(t *testing.T) {
	s := vllmtest.NewServer(t)
	s.AddFault(vllmtest.Fault{Path: "/health", Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// the handler gives up too, long before the hour is over
	require.Eventually(t, func() bool { return s.Requests()[0].Fault }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 0, s.Requests()[0].Status)
}

func TestFaultDelayThenAnswer(t *testing.T) {
	s := vllmtest.NewServer(t)
	s.AddFault(vllmtest.Fault{Path: "/version", Delay: 10 * time.Millisecond, Times: 1})
	status, raw := get(t, s.URL+"/version")
	require.Equal(t, 200, status, "a delay-only fault lets the request through")
	require.JSONEq(t, `{"version":"0.11.0"}`, string(raw))
}

func TestClientRetriesInjectedFaults(t *testing.T) {
	s := vllmtest.NewServer(t)
	s.FailNext("/version", 2, http.StatusServiceUnavailable, "")
	c := s.Client(vllm.WithRetryWait(time.Millisecond, 5*time.Millisecond))
	v, err := c.Version(context.Background())
	require.NoError(t, err)
	require.Equal(t, vllmtest.DefaultVersion, v)
	require.Equal(t, 3, s.RequestCount("/version"))

	// 400s are not retried and surface as the client's typed errors
	_, err = c.Completions(context.Background(), vllm.CompletionRequest{Prompts: [][]int32{{1, 2}}, MaxTokens: 1, PromptLogprobs: intPtr(50)})
	require.ErrorIs(t, err, vllm.ErrMaxLogprobs)
	var apiErr *vllm.APIError
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, 400, apiErr.Status)
	require.Equal(t, 1, s.RequestCount("/v1/completions"))
}

func intPtr(n int) *int { return &n }

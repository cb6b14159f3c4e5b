package vllm_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// shortTimeouts make a stalled generation of 8 tokens fail after 100 ms + 8 ms.
var shortTimeouts = vllm.WithTimeouts(vllm.Timeouts{GenerateBase: 100 * time.Millisecond, GeneratePerToken: time.Millisecond})

func TestStalledServerTimesOutWithoutRetry(t *testing.T) {
	s := vllmtest.NewServer(t)
	s.AddFault(vllmtest.Fault{Path: "/v1/completions", Delay: time.Hour}) // a hung engine
	c := s.Client(shortTimeouts, vllm.WithRetryWait(time.Millisecond, time.Millisecond))
	_, err := c.Generate(bg, rollout.GenerateRequest{Prompt: s.Tokenize("hi"), MaxTokens: 8, Sampling: sampling.Neutral(1)})
	var te *vllm.AttemptTimeoutError
	require.ErrorAs(t, err, &te)
	require.True(t, te.Headers)
	require.Equal(t, 108*time.Millisecond, te.Limit, "the limit grows with max_tokens")
	require.ErrorContains(t, err, "hung")
	require.Equal(t, 1, s.RequestCount("/v1/completions"), "a hung server is not asked again")
}

func TestPoolMarksAStalledServerFailed(t *testing.T) {
	hung, ok := vllmtest.NewServer(t), vllmtest.NewServer(t)
	hung.AddFault(vllmtest.Fault{Path: "/v1/completions", Delay: time.Hour})
	p, err := vllm.NewPool([]string{hung.URL, ok.URL}, vllm.WithModel(hung.Model()), shortTimeouts, vllm.WithHealthCheck(time.Hour, time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	for range 4 {
		g, err := p.Generate(bg, rollout.GenerateRequest{Prompt: ok.Tokenize("hi"), MaxTokens: 8, Sampling: sampling.Neutral(1)})
		require.NoError(t, err, "a stalled server's calls move on to another")
		require.NotEmpty(t, g.Tokens)
	}
	require.Equal(t, []string{ok.URL}, p.Healthy(), "the stalled server is marked failed")
	require.Equal(t, 1, hung.RequestCount("/v1/completions"), "and gets no more calls")
}

func TestNoConnectionChurnAt64InFlight(t *testing.T) {
	s := vllmtest.NewServer(t)
	s.AddFault(vllmtest.Fault{Path: "/v1/completions", Delay: 20 * time.Millisecond}) // keeps 64 calls in flight together
	c := s.Client()
	prompt := s.Tokenize("hello there")
	const inFlight, rounds = 64, 4
	for range rounds {
		var g errgroup.Group
		for range inFlight {
			g.Go(func() error {
				_, err := c.Generate(bg, rollout.GenerateRequest{Prompt: prompt, MaxTokens: 4, Sampling: sampling.Neutral(1)})
				return err
			})
		}
		require.NoError(t, g.Wait())
	}
	require.LessOrEqual(t, s.Connections(), inFlight+4, "connections are reused across rounds (%d calls)", inFlight*rounds)
	t.Logf("%d calls, %d connections", inFlight*rounds, s.Connections())
}

func TestGoDefaultIdleConnsWouldChurn(t *testing.T) {
	// The same load with 2 idle connections per host (Go's default) opens far more
	// connections: the counter sees churn, so the test above can fail.
	s := vllmtest.NewServer(t)
	s.AddFault(vllmtest.Fault{Path: "/v1/completions", Delay: 20 * time.Millisecond})
	c := s.Client(vllm.WithIdleConns(2))
	prompt := s.Tokenize("hello there")
	var mu sync.Mutex
	var errs []error
	for range 3 {
		var g errgroup.Group
		for range 64 {
			g.Go(func() error {
				_, err := c.Generate(bg, rollout.GenerateRequest{Prompt: prompt, MaxTokens: 4, Sampling: sampling.Neutral(1)})
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return nil
			})
		}
		_ = g.Wait()
	}
	require.NoError(t, errors.Join(errs...))
	require.Greater(t, s.Connections(), 64+4)
}

func TestStallInTheMiddleOfTheBodyTimesOut(t *testing.T) {
	// Headers and the start of the answer arrive, then nothing: the attempt's whole
	// limit (twice the role's) ends it.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"id":"cmpl-1","choices":[{"index":0,`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c := newTestClient(t, srv.URL, vllm.WithModel("m"), shortTimeouts)
	_, err := c.Generate(bg, rollout.GenerateRequest{Prompt: []int32{1, 2}, MaxTokens: 8, Sampling: sampling.Neutral(1)})
	var te *vllm.AttemptTimeoutError
	require.ErrorAs(t, err, &te)
	require.False(t, te.Headers, "the headers came; the body did not")
	require.ErrorContains(t, err, "did not complete within 216ms")
}

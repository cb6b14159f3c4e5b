package vllm_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentic-opd/agenticopd/vllm"
)

// TestClientKeepsConnections sends rounds of concurrent requests and counts the
// connections the server accepts: the client keeps one per request in flight instead
// of dialing again for every request past net/http's default of two idle connections
// per host.
func TestClientKeepsConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"count":1,"max_model_len":10,"tokens":[1]}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := vllm.NewClient(srv.URL, vllm.WithModel("m"))
	require.NoError(t, err)
	const inFlight, rounds = 16, 5
	text := "x"
	for range rounds {
		var eg errgroup.Group
		for range inFlight {
			eg.Go(func() error {
				_, err := c.Tokenize(t.Context(), vllm.TokenizeRequest{Prompt: &text})
				return err
			})
		}
		require.NoError(t, eg.Wait())
	}
	assert.LessOrEqual(t, int(conns.Load()), 2*inFlight, "connections dialed for %d rounds of %d requests", rounds, inFlight)
}

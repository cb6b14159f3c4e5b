package atropos_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
)

// takeThenDrop stands in front of srv: every post to /scored_data, and the first to
// /scored_data_list, reaches the API, and then the connection is cut before the reply
// reaches the client, as a proxy or a network that fails after the API took the
// groups; afterFirstList, when not nil, runs before that first list's connection is
// cut. Other requests pass through.
func takeThenDrop(t *testing.T, srv *atropostest.Server, afterFirstList func()) (url string, posts *atomic.Int32) {
	t.Helper()
	posts = new(atomic.Int32)
	var lists atomic.Int32
	hc := httpClient(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, srv.URL()+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := hc.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		reply, _ := io.ReadAll(resp.Body)
		first := r.URL.Path == "/scored_data_list" && lists.Add(1) == 1
		if first && afterFirstList != nil {
			afterFirstList()
		}
		if r.URL.Path == "/scored_data" || first {
			posts.Add(1)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(reply)
	})
	front := httptest.NewServer(h)
	t.Cleanup(front.Close)
	return front.URL, posts
}

// A post the API took but whose reply was lost counts as a copy, and the retries stop
// at MaxCopies: the group goes to the dead-letter file, with why, instead of a third
// post into a live API.
func TestMaybeTakenPostsStopAtMaxCopies(t *testing.T) {
	for _, maxCopies := range []int{1, 2, 3} {
		t.Run("", func(t *testing.T) {
			srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
			url, posts := takeThenDrop(t, srv, nil)
			dir := t.TempDir()
			c, err := atropos.NewClient(url, atropos.ClientConfig{
				EnvName: "env", GroupSize: 2, SpoolDir: dir, HTTPClient: httpClient(t), MaxCopies: maxCopies,
				PollInterval: 2e6, StatusInterval: 2e6,
				Retry: atropos.RetryConfig{MinBackoff: 1e6, MaxBackoff: 5e6, MaxAttempts: 10},
			})
			require.NoError(t, err)
			require.NoError(t, c.Register(context.Background()))

			err = c.Send(context.Background(), group(5, 2))
			require.ErrorIs(t, err, atropos.ErrRejected)
			require.ErrorContains(t, err, "not sent again")
			require.EqualValues(t, maxCopies, posts.Load(), "posts that reached the API")
			require.Len(t, srv.Received(), maxCopies, "copies the API holds")
			require.Equal(t, 1, c.Abandoned())
			dls := readDeadLetters(t, filepath.Join(dir, "dead-letter.jsonl"))
			require.Len(t, dls, 1)
			require.Equal(t, []float64{5, 5.25}, dls[0].Group.Scores)
			require.Contains(t, dls[0].Error, "may have taken")
			n, err := c.Spooled()
			require.NoError(t, err)
			require.Zero(t, n, "the group left the spool for the dead-letter file")
		})
	}
}

// A list the API may have taken once and then refused is split, and each of its groups
// keeps the list's count: posted alone once more, never twice.
func TestSplitListKeepsItsCount(t *testing.T) {
	srv := atropostest.NewServer(t, atropostest.WithTrainer(trainerReg))
	// The first list post is taken and its reply lost; the API refuses the retry.
	url, posts := takeThenDrop(t, srv, func() { srv.SetError("/scored_data_list", 400, "list refused") })
	dir := t.TempDir()
	c, err := atropos.NewClient(url, atropos.ClientConfig{
		EnvName: "env", GroupSize: 2, SpoolDir: dir, HTTPClient: httpClient(t),
		PollInterval: 2e6, StatusInterval: 2e6,
		Retry: atropos.RetryConfig{MinBackoff: 1e6, MaxBackoff: 5e6, MaxAttempts: 10},
	})
	require.NoError(t, err)
	require.NoError(t, c.Register(context.Background()))
	err = c.Send(context.Background(), group(1, 2), group(2, 2))
	require.ErrorIs(t, err, atropos.ErrAbandoned)
	require.EqualValues(t, 1+2, posts.Load(), "the list once, then each group alone once")
	require.Equal(t, []float64{1, 1, 2, 2}, scoresOf(srv.Received()), "two copies of each group at most")
	require.Equal(t, 2, c.Abandoned())
	require.Len(t, readDeadLetters(t, filepath.Join(dir, "dead-letter.jsonl")), 2)
}

func TestMaxCopiesConfig(t *testing.T) {
	_, err := atropos.NewClient("http://h", atropos.ClientConfig{EnvName: "e", GroupSize: 2, SpoolDir: "x", MaxCopies: -1})
	require.ErrorContains(t, err, "MaxCopies -1")
}

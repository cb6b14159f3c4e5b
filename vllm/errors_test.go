package vllm_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm"
)

func TestDecodeErrorShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		file   string
		want   vllm.APIError
		is     error
	}{
		{"flat max logprobs", 400, "error_flat_max_logprobs.json",
			vllm.APIError{Status: 400, Type: "BadRequestError", Message: "Requested prompt logprobs of 50, which is greater than max allowed: 20", Code: "400"}, vllm.ErrMaxLogprobs},
		{"nested max logprobs with param", 400, "error_nested_max_logprobs.json",
			vllm.APIError{Status: 400, Type: "BadRequestError", Message: "Requested prompt logprobs of 64, which is greater than max allowed: 32 (parameter=prompt_logprobs, value=64)", Param: "prompt_logprobs", Code: "400"}, vllm.ErrMaxLogprobs},
		{"max logprobs in other words", 400, "error_max_logprobs_other_case.json",
			vllm.APIError{Status: 400, Message: "requested Prompt Logprobs of 50 which is greater than the maximum allowed 20"}, vllm.ErrMaxLogprobs},
		{"nested context length", 400, "error_context_length.json",
			vllm.APIError{Status: 400, Type: "BadRequestError", Message: "This model's maximum context length is 32768 tokens. However, you requested 33000 tokens (32000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", Code: "400"}, vllm.ErrContextLength},
		{"decoder prompt too long", 400, "error_decoder_prompt_too_long.json",
			vllm.APIError{Status: 400, Type: "BadRequestError", Message: "The decoder prompt (length 33000) is longer than the maximum model length of 32768. Make sure that `max_model_len` is no smaller than the number of text tokens.", Code: "400"}, vllm.ErrContextLength},
		{"max_tokens too large", 400, "error_max_tokens_too_large.json",
			vllm.APIError{Status: 400, Type: "BadRequestError", Message: "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).", Code: "400"}, vllm.ErrContextLength},
		{"flat model not found", 404, "error_model_not_found.json",
			vllm.APIError{Status: 404, Type: "NotFoundError", Message: "The model `gpt-5` does not exist.", Code: "404"}, vllm.ErrModelNotFound},
		{"string error", 401, "error_string.json", vllm.APIError{Status: 401, Message: "Unauthorized"}, nil},
		{"detail string", 404, "error_detail_string.json", vllm.APIError{Status: 404, Message: "Not Found"}, nil},
		{"detail list", 422, "error_detail_list.json", vllm.APIError{Status: 422, Message: "body.prompt: Field required; body.max_tokens: Input should be a valid integer"}, nil},
		{"plain text", 500, "error_plain.txt", vllm.APIError{Status: 500, Message: "Internal Server Error"}, nil},
		{"nested internal", 500, "error_internal_nested.json",
			vllm.APIError{Status: 500, Type: "InternalServerError", Message: "EngineCore encountered an issue. See stack trace (above) for the root cause.", Code: "500"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := vllm.DecodeError(tc.status, readTestdata(t, tc.file))
			if d := cmp.Diff(&tc.want, got, cmpopts.IgnoreUnexported(vllm.APIError{})); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			for _, s := range []error{vllm.ErrMaxLogprobs, vllm.ErrContextLength, vllm.ErrModelNotFound} {
				require.Equal(t, s == tc.is, errors.Is(got, s), "errors.Is %v", s)
			}
		})
	}
}

func TestDecodeErrorOddBodies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"empty body", 503, "", "Service Unavailable"},
		{"json array", 500, `[1,2]`, "[1,2]"},
		{"object without message", 500, `{"foo":1}`, `{"foo":1}`},
		{"null error", 500, `{"error":null,"message":"m"}`, "m"},
		{"html", 502, "<html><body>Bad Gateway</body></html>", "<html><body>Bad Gateway</body></html>"},
		{"long text is cut", 500, strings.Repeat("é", 2000), strings.Repeat("é", 512) + "…"},
		{"invalid utf8", 500, "a\xffb", "a\uFFFDb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := vllm.DecodeError(tc.status, []byte(tc.body))
			require.Equal(t, tc.status, got.Status)
			require.Equal(t, tc.want, got.Message)
		})
	}
}

func TestMaxLogprobsError(t *testing.T) {
	r := newReplay(t, map[string]route{"POST /v1/completions": {status: 400, file: "error_nested_max_logprobs.json"}})
	c := newTestClient(t, r.srv.URL, vllm.WithModel("m"))
	_, err := c.Completions(bg, vllm.CompletionRequest{Prompts: [][]int32{{1, 2}}, PromptLogprobs: new(64)})
	require.ErrorIs(t, err, vllm.ErrMaxLogprobs)
	var ml *vllm.MaxLogprobsError
	require.ErrorAs(t, err, &ml)
	require.Equal(t, vllm.MaxLogprobsError{Kind: "prompt", Requested: 64, Max: 32}, *ml)
	var ae *vllm.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "prompt_logprobs", ae.Param)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "vllm: POST /v1/completions: 400 Bad Request (BadRequestError): Requested prompt logprobs of 64"), msg)
	require.Contains(t, msg, "start vLLM with --max-logprobs 64 (or more), or lower the top-K asked for (Config.DistillTopK in agenticopd) to at most 32")
	require.Len(t, r.requests("POST /v1/completions"), 1, "a 400 is not retried")

	sample := vllm.DecodeError(400, readTestdata(t, "error_nested_sample_logprobs.json"))
	require.ErrorAs(t, sample, &ml)
	require.Equal(t, vllm.MaxLogprobsError{Kind: "sample", Requested: 25, Max: 20}, *ml)
	require.Contains(t, ml.Error(), "--max-logprobs 25")
}

// flaky answers with the given statuses in turn, then with ok.
func flaky(t *testing.T, hits *atomic.Int32, statuses ...int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n := int(hits.Add(1))
		if n <= len(statuses) {
			w.WriteHeader(statuses[n-1])
			_, _ = io.WriteString(w, `{"error":{"message":"attempt failed","type":"X","param":null,"code":1}}`)
			return
		}
		_, _ = io.WriteString(w, `{"version":"0.11.0"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		retryMax int
		hits     int32
		status   int // of the final error; 0 for success
	}{
		{"5xx retried then success", []int{500, 502, 503}, 4, 4, 0},
		{"429 retried", []int{429}, 4, 2, 0},
		{"504 retried until retries run out", []int{504, 504, 504}, 2, 3, 504},
		{"400 not retried", []int{400}, 4, 1, 400},
		{"404 not retried", []int{404}, 4, 1, 404},
		{"422 not retried", []int{422}, 4, 1, 422},
		{"501 not retried", []int{501}, 4, 1, 501},
		{"no retries", []int{500}, 0, 1, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			srv := flaky(t, &hits, tc.statuses...)
			c := newTestClient(t, srv.URL, vllm.WithRetryMax(tc.retryMax))
			v, err := c.Version(bg)
			require.Equal(t, tc.hits, hits.Load())
			if tc.status == 0 {
				require.NoError(t, err)
				require.Equal(t, "0.11.0", v)
				return
			}
			var ae *vllm.APIError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.status, ae.Status)
			require.Equal(t, "attempt failed", ae.Message, "the final body is decoded")
		})
	}
}

func TestRetryConnectionErrors(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // drop the connection without an answer
			}
			return
		}
		_, _ = io.WriteString(w, `{"version":"0.11.0"}`)
	}))
	t.Cleanup(srv.Close)
	c := newTestClient(t, srv.URL)
	v, err := c.Version(bg)
	require.NoError(t, err)
	require.Equal(t, "0.11.0", v)
	require.Equal(t, int32(3), hits.Load())
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	c := newTestClient(t, "http://"+addr, vllm.WithRetryMax(1))
	_, err = c.Version(bg)
	require.ErrorContains(t, err, "vllm: GET /version: ")
	var ae *vllm.APIError
	require.False(t, errors.As(err, &ae))
}

func TestDeadlineSpansAllAttempts(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	c, err := vllm.NewClient(srv.URL, vllm.WithRetryMax(1000), vllm.WithRetryWait(5*time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(bg, 150*time.Millisecond)
	defer cancel()
	_, err = c.Version(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "vllm: GET /version: ")
	require.Greater(t, hits.Load(), int32(1), "attempts were retried until the deadline")
	require.Less(t, hits.Load(), int32(1001), "the deadline, not the retry budget, ended the call")
}

func TestCanceledContext(t *testing.T) {
	srv := flaky(t, new(atomic.Int32))
	c := newTestClient(t, srv.URL)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := c.Version(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestAttemptTimeoutRetries(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			<-r.Context().Done() // hang until the client gives up on this attempt
			return
		}
		_, _ = io.WriteString(w, `{"version":"0.11.0"}`)
	}))
	t.Cleanup(srv.Close)
	c := newTestClient(t, srv.URL, vllm.WithAttemptTimeout(50*time.Millisecond))
	v, err := c.Version(bg)
	require.NoError(t, err)
	require.Equal(t, "0.11.0", v)
	require.Equal(t, int32(2), hits.Load())
}

func TestLoggerSeesRetries(t *testing.T) {
	var hits atomic.Int32
	srv := flaky(t, &hits, 503)
	var buf strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newTestClient(t, srv.URL, vllm.WithLogger(logger))
	_, err := c.Version(bg)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, buf.String(), "retrying request")
	require.Contains(t, buf.String(), "status: 503")
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

package atropos

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// GzipMinBytes is the body size from which requests are gzipped, as BaseEnv does.
const GzipMinBytes = 1024

// ErrNotRegistered reports a call that needs a registration first: an env that has not
// completed [Client.Register], or a trainer API answering "Trainer not registered".
var ErrNotRegistered = errors.New("atropos: not registered")

// APIError is a reply from the trajectory API with a status other than 200, or a 200
// reply whose body does not have the expected shape (Status 200).
type APIError struct {
	// Method and Path name the request that got the reply ("POST", "/scored_data").
	Method, Path string
	// Status is the reply's HTTP status code.
	Status int
	// Message is the server's message: FastAPI's "detail" for JSON errors, or the body.
	Message string
	// RetryAfter is the wait a 408, 429 or 503 reply asked for in its Retry-After
	// header (seconds or an HTTP date); zero when it set none.
	RetryAfter time.Duration
}

// Error describes the reply: method, path, status and the server's message.
func (e *APIError) Error() string {
	return fmt.Sprintf("atropos: %s %s: %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// Temporary reports whether retrying may help: 5xx, 408 Request Timeout, 429 Too Many
// Requests and unexpected 200 bodies yes, other 4xx no.
func (e *APIError) Temporary() bool {
	switch e.Status {
	case http.StatusOK, http.StatusRequestTimeout, http.StatusTooManyRequests:
		return true
	}
	return e.Status >= 500
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date. It returns
// zero for a missing or malformed header.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// api is the HTTP plumbing shared by Client and Trainer.
type api struct {
	base   *url.URL
	hc     *http.Client
	logger *slog.Logger

	// Requests in flight, and when the last one ended (UnixNano, on the real clock):
	// a client waiting on a reply is not idle (see [Client.beat]).
	active  atomic.Int32
	lastEnd atomic.Int64
}

// begin counts a request in flight until the returned function is called.
func (a *api) begin() (end func()) {
	a.active.Add(1)
	return func() {
		a.lastEnd.Store(time.Now().UnixNano())
		a.active.Add(-1)
	}
}

func newAPI(baseURL string, hc *http.Client, logger *slog.Logger) (*api, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("atropos: base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("atropos: base URL %q: want http(s)://host[:port]", baseURL)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &api{base: u, hc: hc, logger: logger}, nil
}

// do sends one request; body, when not nil, is sent as JSON (gzipped from GzipMinBytes).
// A 200 reply is decoded into out (when not nil); anything else becomes an *APIError.
func (a *api) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	gz := false
	if body != nil {
		// The transport may read a request's body after Do returned (when the reply
		// came before the whole body was sent), and body is the caller's again once do
		// returns (Send reuses its buffers): the request gets the gzip or a copy.
		if len(body) >= GzipMinBytes {
			if z, ok := gzipBytes(body); ok {
				rd, gz = bytes.NewReader(z), true
			}
		}
		if !gz {
			rd = bytes.NewReader(bytes.Clone(body))
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base.String()+path, rd)
	if err != nil {
		return fmt.Errorf("atropos: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		if gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
	}
	defer a.begin()()
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("atropos: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("atropos: %s %s: reading reply: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Message: errorMessage(data), RetryAfter: retryAfter(resp.Header, time.Now())}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &APIError{Method: method, Path: path, Status: http.StatusOK, Message: fmt.Sprintf("unexpected reply %.200q: %v", data, err)}
	}
	return nil
}

// gzipBytes compresses b and reports whether that made it smaller.
func gzipBytes(b []byte) ([]byte, bool) {
	var buf bytes.Buffer
	buf.Grow(len(b) / 4)
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	_, _ = zw.Write(b)
	if err := zw.Close(); err != nil {
		return nil, false
	}
	if buf.Len() >= len(b) {
		return nil, false
	}
	return buf.Bytes(), true
}

// errorMessage extracts FastAPI's "detail" (a string or a list of {msg, loc}) or returns
// the trimmed body.
func errorMessage(body []byte) string {
	var d struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &d) == nil && len(d.Detail) > 0 {
		var s string
		if json.Unmarshal(d.Detail, &s) == nil {
			return s
		}
		var list []struct {
			Msg string `json:"msg"`
			Loc []any  `json:"loc"`
		}
		if json.Unmarshal(d.Detail, &list) == nil && len(list) > 0 {
			parts := make([]string, len(list))
			for i, e := range list {
				parts[i] = fmt.Sprintf("%s (at %v)", e.Msg, e.Loc)
			}
			return strings.Join(parts, "; ")
		}
		return string(d.Detail)
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 1000 {
		s = s[:1000] + "…"
	}
	return s
}

// retryable reports whether err may go away on a retry: network errors, 5xx, and
// unexpected 200 bodies, but not 4xx or the end of ctx.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, errCopiesSpent) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Temporary()
	}
	return true
}

// postJSON marshals in with encoding/json and POSTs it.
func (a *api) postJSON(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("atropos: POST %s: %w", path, err)
	}
	return a.do(ctx, http.MethodPost, path, body, out)
}

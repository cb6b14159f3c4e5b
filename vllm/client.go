package vllm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// Default retry settings used when no option overrides them.
const (
	DefaultRetryMax     = 4                      // retries after a failed attempt ([WithRetryMax])
	DefaultRetryWaitMin = 200 * time.Millisecond // shortest backoff between attempts ([WithRetryWait])
	DefaultRetryWaitMax = 5 * time.Second        // longest backoff between attempts ([WithRetryWait])
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// Client talks to one vLLM OpenAI-compatible server. It is safe for concurrent use.
//
// A Client implements [rollout.Policy], [scorer.LogprobScorer] and [judge.ChatModel].
type Client struct {
	base    *url.URL
	apiKey  string
	logger  *slog.Logger
	retry   *retryablehttp.Client // retries per the options
	once    *retryablehttp.Client // one attempt: health probes
	score   scoreLimits
	to      Timeouts
	fixedMd string
	// ownHTTP is the client's own *http.Client (no WithHTTPClient): its idle
	// connections may be closed by a Pool that closes.
	ownHTTP *http.Client

	mu    sync.Mutex
	model string // resolved lazily from /v1/models when fixedMd is ""

	prompts promptCache // the JSON of recent prompts, which the next ones extend
}

// Option configures a [Client] or a [Pool].
type Option func(*config)

type config struct {
	httpClient     *http.Client
	apiKey         string
	logger         *slog.Logger
	model          string
	retryMax       int
	retryWaitMin   time.Duration
	retryWaitMax   time.Duration
	attemptTimeout time.Duration
	score          scoreLimits
	healthInterval time.Duration
	healthTimeout  time.Duration
	timeouts       Timeouts
	idleConns      int
}

// DefaultIdleConnsPerServer is how many idle connections a client keeps to its server
// unless [WithIdleConns] says otherwise: enough for 64 rollouts, their judge and
// teacher calls in flight without closing and reopening connections (Go's own default
// keeps 2).
const DefaultIdleConnsPerServer = 128

// WithIdleConns sets how many idle connections the client's own transport keeps to
// the server; size it for the calls in flight (Config.MaxRollouts plus the judge's and
// the teacher's). It has no effect with [WithHTTPClient].
func WithIdleConns(n int) Option { return func(cf *config) { cf.idleConns = n } }

// WithHTTPClient sets the *http.Client that carries every request (default: a pooled
// client of its own). The client is copied, never modified.
func WithHTTPClient(c *http.Client) Option { return func(cf *config) { cf.httpClient = c } }

// WithAPIKey sends "Authorization: Bearer key" with every request, as a server started
// with --api-key requires.
func WithAPIKey(key string) Option { return func(cf *config) { cf.apiKey = key } }

// WithLogger logs retries and failed attempts to l. Without it the client never logs.
func WithLogger(l *slog.Logger) Option { return func(cf *config) { cf.logger = l } }

// WithModel fixes the model name sent in requests. Without it the client asks
// GET /v1/models once, on first need, and uses the first model listed.
func WithModel(name string) Option { return func(cf *config) { cf.model = name } }

// WithRetryMax sets how many times a failed attempt (connection error, 429 or 5xx) is
// retried; 0 disables retries. Default [DefaultRetryMax].
func WithRetryMax(n int) Option { return func(cf *config) { cf.retryMax = max(n, 0) } }

// WithRetryWait sets the bounds of the exponential backoff between attempts (a 429 or 503
// carrying Retry-After waits as told). Defaults [DefaultRetryWaitMin], [DefaultRetryWaitMax].
func WithRetryWait(minWait, maxWait time.Duration) Option {
	return func(cf *config) { cf.retryWaitMin, cf.retryWaitMax = minWait, max(minWait, maxWait) }
}

// WithAttemptTimeout bounds each single attempt, including reading its response; an
// attempt that times out is retried. The ctx of a call bounds all attempts together.
// Default: no per-attempt bound.
func WithAttemptTimeout(d time.Duration) Option { return func(cf *config) { cf.attemptTimeout = d } }

// NewClient returns a client for the vLLM server at baseURL (for example
// "http://localhost:8000"; a trailing "/v1" is accepted and dropped). It does no I/O.
func NewClient(baseURL string, opts ...Option) (*Client, error) {
	cf := defaultConfig()
	for _, o := range opts {
		o(&cf)
	}
	return newClient(baseURL, cf)
}

func defaultConfig() config {
	return config{
		retryMax:       DefaultRetryMax,
		retryWaitMin:   DefaultRetryWaitMin,
		retryWaitMax:   DefaultRetryWaitMax,
		score:          defaultScoreLimits,
		healthInterval: DefaultHealthInterval,
		healthTimeout:  DefaultHealthTimeout,
		idleConns:      DefaultIdleConnsPerServer,
	}
}

func newClient(baseURL string, cf config) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("vllm: base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("vllm: base URL %q: want http(s)://host[:port]", baseURL)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1")
	u.RawQuery, u.Fragment = "", ""

	hc := &http.Client{Transport: http.DefaultTransport}
	if cf.httpClient != nil {
		c := *cf.httpClient
		hc = &c
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 0 // no limit across hosts
		tr.MaxIdleConnsPerHost = max(cf.idleConns, 2)
		hc.Transport = tr
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = limitTransport{base: base}
	if cf.attemptTimeout > 0 {
		hc.Timeout = cf.attemptTimeout
	}
	mk := func(retries int) *retryablehttp.Client {
		rc := &retryablehttp.Client{
			HTTPClient:   hc,
			RetryWaitMin: cf.retryWaitMin,
			RetryWaitMax: cf.retryWaitMax,
			RetryMax:     retries,
			CheckRetry:   noRetryOnTimeout(retryablehttp.DefaultRetryPolicy),
			Backoff:      retryablehttp.DefaultBackoff,
			ErrorHandler: retryablehttp.PassthroughErrorHandler,
		}
		if cf.logger != nil {
			rc.Logger = cf.logger // *slog.Logger satisfies retryablehttp.LeveledLogger
		}
		return rc
	}
	if err := cf.score.validate(); err != nil {
		return nil, err
	}
	var own *http.Client
	if cf.httpClient == nil {
		own = hc
	}
	to := cf.timeouts.withDefaults()
	return &Client{
		ownHTTP: own,
		base:    u,
		apiKey:  cf.apiKey,
		logger:  cf.logger,
		retry:   mk(cf.retryMax),
		once:    mk(0),
		score:   cf.score,
		to:      to,
		fixedMd: cf.model,
	}, nil
}

// BaseURL returns the server's base URL, without a trailing "/v1".
func (c *Client) BaseURL() string { return c.base.String() }

// call is one HTTP exchange: it sends body (JSON-encoded unless nil or []byte), and
// returns the response body of a 2xx answer. Any other answer becomes an *APIError.
// Errors are wrapped with "vllm: METHOD PATH: ".
func (c *Client) call(ctx context.Context, rc *retryablehttp.Client, method, path string, body any) ([]byte, error) {
	var raw []byte
	err := c.exchange(withLimit(ctx, c.to.Request), rc, method, path, body, func(resp *http.Response, r io.Reader) error {
		var buf bytes.Buffer
		if resp.ContentLength > 0 {
			buf.Grow(int(resp.ContentLength) + bytes.MinRead)
		}
		_, err := buf.ReadFrom(r)
		raw = buf.Bytes()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("vllm: %s %s: %w", method, path, err)
	}
	return raw, nil
}

// post sends body to path and decodes the 2xx answer with decode, under limit. An
// answer that carries prompt_logprobs (stream) is decoded as it arrives and never
// held whole; the others are small and read whole first, for the in-memory scanner.
// Either way a failure to read the body is a transport error, as in call, and an
// answer that does not decode is "vllm: POST path: decode response: …".
func (c *Client) post(ctx context.Context, limit time.Duration, path string, body any, stream bool, decode func(*jsonscan.Scanner) error) error {
	if !stream {
		raw, err := c.call(withLimit(ctx, limit), c.retry, http.MethodPost, path, body)
		if err != nil {
			return err
		}
		if err := decode(&jsonscan.Scanner{Data: raw}); err != nil {
			return fmt.Errorf("vllm: POST %s: decode response: %w", path, err)
		}
		return nil
	}
	err := c.exchange(withLimit(ctx, limit), c.retry, http.MethodPost, path, body, func(_ *http.Response, r io.Reader) error {
		if err := decodeFrom(r, decode); err != nil {
			return fmt.Errorf("decode response: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("vllm: POST %s: %w", path, err)
	}
	return nil
}

// decodeFrom runs decode on a streaming scanner over r; a failed read is the error,
// whatever decode made of the bytes that came before it.
func decodeFrom(r io.Reader, decode func(*jsonscan.Scanner) error) error {
	s := jsonscan.NewStream(r, 0)
	err := decode(s)
	if rerr := s.ReadErr(); rerr != nil {
		return fmt.Errorf("read: %w", rerr)
	}
	return err
}

// exchange sends the request and hands the body of a 2xx answer to read. Whatever
// read returns, a failure to read the body (the connection broke, or the attempt
// timed out, in the middle of the answer) is reported as such: a transport error, or
// the end of ctx.
func (c *Client) exchange(ctx context.Context, rc *retryablehttp.Client, method, path string, body any, read func(resp *http.Response, r io.Reader) error) error {
	var payload any
	switch b := body.(type) {
	case nil:
	case []byte:
		payload = b
	default:
		buf, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		payload = buf
	}
	u := *c.base
	u.Path += path
	req, err := retryablehttp.NewRequestWithContext(ctx, method, u.String(), payload)
	if err != nil {
		return err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := rc.Do(req)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			if errors.Is(err, ctxErr) {
				return err
			}
			return fmt.Errorf("%w (%v)", ctxErr, err)
		}
		return &transportError{err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
		return DecodeError(resp.StatusCode, raw)
	}
	br := &bodyReader{r: resp.Body}
	err = read(resp, br)
	if br.err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("read response: %w", ctxErr)
		}
		return &transportError{fmt.Errorf("read response: %w", br.err)}
	}
	return err
}

// bodyReader remembers the first error, other than io.EOF, of reading a body.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// transportError is a failure to exchange a request with the server at all (the
// connection failed or broke) after every retry.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// decodeInto wraps a JSON decoding failure of a successful response.
func decodeInto(method, path string, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("vllm: %s %s: decode response: %w", method, path, err)
	}
	return nil
}

// Model describes one entry of GET /v1/models.
type Model struct {
	ID      string `json:"id"`       // model name to send in requests
	Object  string `json:"object"`   // always "model"
	Created int64  `json:"created"`  // Unix time in seconds the server reports
	OwnedBy string `json:"owned_by"` // owner the server reports, "vllm" for vLLM
	Root    string `json:"root"`     // path or name the model was loaded from
	// Parent is the base model of a LoRA adapter, "" otherwise.
	Parent string `json:"parent"`
	// MaxModelLen is the context length; 0 when the server does not say.
	MaxModelLen int `json:"max_model_len"`
}

// Models lists the served models (GET /v1/models).
func (c *Client) Models(ctx context.Context) ([]Model, error) {
	raw, err := c.call(ctx, c.retry, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Data []Model `json:"data"`
	}
	if err := decodeInto(http.MethodGet, "/v1/models", raw, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Health reports whether the server is ready (GET /health answers 2xx). It makes one
// attempt, without retries, so that it can serve as a readiness probe.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.call(ctx, c.once, http.MethodGet, "/health", nil)
	return err
}

// Version returns the server's version string (GET /version), for example "0.10.1.1".
func (c *Client) Version(ctx context.Context) (string, error) {
	raw, err := c.call(ctx, c.retry, http.MethodGet, "/version", nil)
	if err != nil {
		return "", err
	}
	var out struct {
		Version string `json:"version"`
	}
	if err := decodeInto(http.MethodGet, "/version", raw, &out); err != nil {
		return "", err
	}
	return out.Version, nil
}

// Model returns the model name the client sends: the one given with [WithModel], or
// else the first model of GET /v1/models, asked once and remembered.
func (c *Client) Model(ctx context.Context) (string, error) {
	if c.fixedMd != "" {
		return c.fixedMd, nil
	}
	c.mu.Lock()
	m := c.model
	c.mu.Unlock()
	if m != "" {
		return m, nil
	}
	models, err := c.Models(ctx)
	if err != nil {
		return "", err
	}
	if len(models) == 0 || models[0].ID == "" {
		return "", fmt.Errorf("vllm: GET /v1/models: the server lists no model")
	}
	c.mu.Lock()
	if c.model == "" {
		c.model = models[0].ID
	}
	m = c.model
	c.mu.Unlock()
	return m, nil
}

// modelFor returns name when set, else the client's model.
func (c *Client) modelFor(ctx context.Context, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	return c.Model(ctx)
}

// mergeExtra encodes v (a struct) and adds extra's members to the JSON object. A key
// of extra that v already sets is an error.
func mergeExtra(v any, extra map[string]any) ([]byte, error) {
	buf, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return buf, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(buf, &obj); err != nil {
		return nil, err
	}
	for k, val := range extra {
		if _, dup := obj[k]; dup {
			return nil, fmt.Errorf("vllm: Extra key %q is already set by a request field", k)
		}
		enc, err := json.Marshal(val)
		if err != nil {
			return nil, fmt.Errorf("vllm: Extra key %q: %w", k, err)
		}
		obj[k] = enc
	}
	return json.Marshal(obj)
}

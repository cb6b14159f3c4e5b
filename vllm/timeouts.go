package vllm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Timeouts bound each attempt of a request, per role. vLLM answers a non-streaming
// request only once it is done, so the response headers of an attempt must arrive
// within the role's limit, and the whole attempt, body included, within twice that.
// An attempt past either limit fails as a connection error: it is not retried on the
// same server (a hung engine stays hung), and a [Pool] marks the server failed and
// moves on. A hung server is thus noticed within one role limit.
//
// The zero value of each field means its default ([DefaultTimeouts]).
type Timeouts struct {
	// Request bounds the small requests: /tokenize, /detokenize, /v1/models,
	// /version, /health.
	Request time.Duration
	// GenerateBase + GeneratePerToken × max_tokens bounds a generation
	// (/v1/completions without prompt_logprobs, and the judge's chat completions).
	GenerateBase, GeneratePerToken time.Duration
	// ScoreBase + ScorePerToken × prompt tokens bounds a scoring request
	// (/v1/completions with prompt_logprobs).
	ScoreBase, ScorePerToken time.Duration
}

// DefaultTimeouts returns the limits a zero field of [Timeouts] means, generous for a
// loaded server: a 2048-token turn may take 60 s + 2048 × 100 ms ≈ 4.4 minutes, a
// 32k-token scoring request 60 s + 32768 × 2 ms ≈ 2.1 minutes.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Request:          30 * time.Second,
		GenerateBase:     60 * time.Second,
		GeneratePerToken: 100 * time.Millisecond,
		ScoreBase:        60 * time.Second,
		ScorePerToken:    2 * time.Millisecond,
	}
}

// WithTimeouts sets the per-role limits of each attempt; zero fields keep their
// defaults. [WithAttemptTimeout], when set, bounds every attempt on top of them.
func WithTimeouts(t Timeouts) Option { return func(cf *config) { cf.timeouts = t } }

func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.Request, &d.Request}, {&t.GenerateBase, &d.GenerateBase}, {&t.GeneratePerToken, &d.GeneratePerToken},
		{&t.ScoreBase, &d.ScoreBase}, {&t.ScorePerToken, &d.ScorePerToken},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

func (t Timeouts) generate(maxTokens int) time.Duration {
	return t.GenerateBase + time.Duration(maxTokens)*t.GeneratePerToken
}

func (t Timeouts) score(promptTokens int) time.Duration {
	return t.ScoreBase + time.Duration(promptTokens)*t.ScorePerToken
}

type limitKey struct{}

// withLimit makes every attempt of the requests made under ctx wait at most d for
// response headers and 2d in all; an outer limit already set wins.
func withLimit(ctx context.Context, d time.Duration) context.Context {
	if _, ok := ctx.Value(limitKey{}).(time.Duration); ok {
		return ctx
	}
	return context.WithValue(ctx, limitKey{}, d)
}

// AttemptTimeoutError is an attempt that ran past its role's limit ([Timeouts]).
type AttemptTimeoutError struct {
	// Headers is true when no response headers came within Limit; false when the
	// whole attempt exceeded twice Limit.
	Headers bool
	// Limit is the role's per-attempt limit that was exceeded ([Timeouts]).
	Limit time.Duration
}

// Error says which limit was exceeded and points to [Timeouts].
func (e *AttemptTimeoutError) Error() string {
	if e.Headers {
		return fmt.Sprintf("no response within %v (the server may be hung or overloaded; see vllm.Timeouts)", e.Limit)
	}
	return fmt.Sprintf("the answer did not complete within %v (see vllm.Timeouts)", 2*e.Limit)
}

// limitTransport applies the limit of the request's ctx to each attempt.
type limitTransport struct{ base http.RoundTripper }

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	d, ok := req.Context().Value(limitKey{}).(time.Duration)
	if !ok || d <= 0 {
		return t.base.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	whole := time.AfterFunc(2*d, func() { cancel(&AttemptTimeoutError{Limit: d}) })
	header := time.AfterFunc(d, func() { cancel(&AttemptTimeoutError{Headers: true, Limit: d}) })
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	header.Stop()
	if err != nil {
		whole.Stop()
		cause := context.Cause(ctx)
		cancel(nil)
		var te *AttemptTimeoutError
		if errors.As(cause, &te) {
			return nil, te
		}
		return nil, err
	}
	resp.Body = &limitBody{ReadCloser: resp.Body, ctx: ctx, stop: func() { whole.Stop(); cancel(nil) }}
	return resp, nil
}

// limitBody ends the attempt's timers when the body is closed, and reports a read cut
// by the limit as an *AttemptTimeoutError.
type limitBody struct {
	io.ReadCloser
	ctx  context.Context
	once sync.Once
	stop func()
}

func (b *limitBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		var te *AttemptTimeoutError
		if errors.As(context.Cause(b.ctx), &te) {
			return n, te
		}
	}
	return n, err
}

func (b *limitBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.stop)
	return err
}

// noRetryOnTimeout wraps a retry policy: an attempt past its limit is not retried.
func noRetryOnTimeout(next func(ctx context.Context, resp *http.Response, err error) (bool, error)) func(ctx context.Context, resp *http.Response, err error) (bool, error) {
	return func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		var te *AttemptTimeoutError
		if errors.As(err, &te) {
			return false, err
		}
		return next(ctx, resp, err)
	}
}

// CloseIdleConnections passes on to the wrapped transport.
func (t limitTransport) CloseIdleConnections() {
	if ci, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

package vllm_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm"
)

// backend is a fake server for pool tests: /health answers healthStatus, chat
// completions answer chatStatus (200 with the server's name as the text), and an
// optional gate holds chat requests until it closes.
type backend struct {
	name         string
	srv          *httptest.Server
	healthStatus atomic.Int32
	chatStatus   atomic.Int32
	chats        atomic.Int32
	health       atomic.Int32
	gate         chan struct{}
	entered      chan struct{}
}

func newBackend(t *testing.T, name string) *backend {
	b := &backend{name: name}
	b.healthStatus.Store(200)
	b.chatStatus.Store(200)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/health":
			b.health.Add(1)
			w.WriteHeader(int(b.healthStatus.Load()))
		case "/v1/chat/completions":
			b.chats.Add(1)
			if b.entered != nil {
				b.entered <- struct{}{}
			}
			if b.gate != nil {
				<-b.gate
			}
			st := int(b.chatStatus.Load())
			w.WriteHeader(st)
			if st == 200 {
				_, _ = io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"`+b.name+`"},"finish_reason":"stop"}]}`)
			} else {
				_, _ = io.WriteString(w, `{"error":{"message":"down","type":"InternalServerError","param":null,"code":500}}`)
			}
		default:
			w.WriteHeader(404)
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

var judgeReq = judge.ChatRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "q"}}, N: 1, MaxTokens: 4}

func newTestPool(t *testing.T, urls []string, opts ...vllm.Option) *vllm.Pool {
	t.Helper()
	base := []vllm.Option{vllm.WithModel("m"), vllm.WithRetryMax(0), vllm.WithHealthCheck(time.Hour, time.Second)}
	p, err := vllm.NewPool(urls, append(base, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func TestNewPoolRejects(t *testing.T) {
	_, err := vllm.NewPool(nil)
	require.ErrorContains(t, err, "no server URLs")
	_, err = vllm.NewPool([]string{"http://a:1", "http://a:1/v1"})
	require.ErrorContains(t, err, "listed twice")
	_, err = vllm.NewPool([]string{"nope"})
	require.ErrorContains(t, err, "base URL")
	_, err = vllm.NewPool([]string{"http://a:1"}, vllm.WithHealthCheck(0, time.Second))
	require.ErrorContains(t, err, "must be > 0")
}

func TestPoolFailsOverAndSkipsFailedServer(t *testing.T) {
	a, b := newBackend(t, "a"), newBackend(t, "b")
	a.chatStatus.Store(500)
	p := newTestPool(t, []string{a.srv.URL, b.srv.URL})
	for range 4 {
		got, err := p.Chat(bg, judgeReq)
		require.NoError(t, err)
		require.Equal(t, []string{"b"}, got.Choices)
	}
	require.Equal(t, int32(1), a.chats.Load(), "a failed once and was skipped afterwards")
	require.Equal(t, []string{b.srv.URL}, p.Healthy())
}

func TestPoolRetriesOnOneOtherServerOnly(t *testing.T) {
	bs := []*backend{newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "c")}
	var urls []string
	for _, b := range bs {
		b.chatStatus.Store(500)
		urls = append(urls, b.srv.URL)
	}
	p := newTestPool(t, urls)
	_, err := p.Chat(bg, judgeReq)
	var ae *vllm.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 500, ae.Status)
	require.ErrorContains(t, err, "failed on 2 servers")
	total := 0
	for _, b := range bs {
		require.LessOrEqual(t, b.chats.Load(), int32(1), "no server sees the request twice")
		total += int(b.chats.Load())
	}
	require.Equal(t, vllm.MaxServersPerCall, total, "one server, then one other, and no more")
	require.Len(t, p.Healthy(), 1, "the third server was not reached, so it is still healthy")
}

func TestPoolDoesNotMarkOn4xx(t *testing.T) {
	a := newBackend(t, "a")
	a.chatStatus.Store(400)
	p := newTestPool(t, []string{a.srv.URL})
	_, err := p.Chat(bg, judgeReq)
	var ae *vllm.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 400, ae.Status)
	require.Equal(t, []string{a.srv.URL}, p.Healthy())
}

func TestPoolAllFailedThenLazyRecheck(t *testing.T) {
	a, b := newBackend(t, "a"), newBackend(t, "b")
	a.chatStatus.Store(500)
	b.chatStatus.Store(503)
	a.healthStatus.Store(503)
	b.healthStatus.Store(503)
	p := newTestPool(t, []string{a.srv.URL, b.srv.URL})
	_, err := p.Chat(bg, judgeReq)
	require.ErrorIs(t, err, vllm.ErrNoHealthyServer)
	var ae *vllm.APIError
	require.ErrorAs(t, err, &ae, "the last server error is kept")
	require.Empty(t, p.Healthy())

	b.chatStatus.Store(200)
	b.healthStatus.Store(200)
	got, err := p.Chat(bg, judgeReq)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, got.Choices)
	require.Equal(t, []string{b.srv.URL}, p.Healthy())
}

func TestPoolBackgroundCheckerTakesServerBack(t *testing.T) {
	a, b := newBackend(t, "a"), newBackend(t, "b")
	a.chatStatus.Store(500)
	a.healthStatus.Store(503)
	p := newTestPool(t, []string{a.srv.URL, b.srv.URL}, vllm.WithHealthCheck(5*time.Millisecond, time.Second))
	_, err := p.Chat(bg, judgeReq)
	require.NoError(t, err)
	require.Equal(t, []string{b.srv.URL}, p.Healthy())
	require.Eventually(t, func() bool { return a.health.Load() >= 2 }, 10*time.Second, 5*time.Millisecond, "the checker probes the failed server")
	require.Equal(t, []string{b.srv.URL}, p.Healthy(), "a failing probe keeps it out")
	a.healthStatus.Store(200)
	require.Eventually(t, func() bool { return len(p.Healthy()) == 2 }, 10*time.Second, 5*time.Millisecond)
	require.Zero(t, b.health.Load(), "healthy servers are not probed")
}

func TestPoolPicksFewestInFlight(t *testing.T) {
	// One call is held by server X. Every later call, made one after the other, must
	// go to the idle server Y; taking turns (round robin) would send every other one
	// to X.
	a, b := newBackend(t, "a"), newBackend(t, "b")
	for _, s := range []*backend{a, b} {
		s.gate = make(chan struct{})
		s.entered = make(chan struct{}, 8)
	}
	p := newTestPool(t, []string{a.srv.URL, b.srv.URL})
	var wg sync.WaitGroup
	results := make(chan string, 4)
	call := func() {
		defer wg.Done()
		got, err := p.Chat(bg, judgeReq)
		if err == nil {
			results <- got.Choices[0]
		}
	}
	wg.Add(1)
	go call()
	var busy, idle *backend
	select {
	case <-a.entered:
		busy, idle = a, b
	case <-b.entered:
		busy, idle = b, a
	}
	close(idle.gate) // the idle server answers at once from now on
	for i := range 3 {
		done := make(chan struct{})
		wg.Add(1)
		go func() { call(); close(done) }()
		select {
		case <-busy.entered:
			t.Errorf("call %d went to the server with a call in flight", i+2)
		case <-idle.entered:
		}
		if t.Failed() {
			break
		}
		<-done
	}
	close(busy.gate)
	wg.Wait()
	close(results)
	var got []string
	for r := range results {
		got = append(got, r)
	}
	require.ElementsMatch(t, []string{busy.name, idle.name, idle.name, idle.name}, got)
}

func TestPoolConnectionErrorFailsOver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	b := newBackend(t, "b")
	p := newTestPool(t, []string{dead, b.srv.URL})
	for range 3 {
		got, err := p.Chat(bg, judgeReq)
		require.NoError(t, err)
		require.Equal(t, []string{"b"}, got.Choices)
	}
	require.Equal(t, []string{b.srv.URL}, p.Healthy())
}

func TestPoolHonoursContext(t *testing.T) {
	a := newBackend(t, "a")
	p := newTestPool(t, []string{a.srv.URL})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := p.Chat(ctx, judgeReq)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, []string{a.srv.URL}, p.Healthy(), "the caller's ctx is no server failure")
}

func TestPoolScoreSpreadsBatches(t *testing.T) {
	fa, sa := newTeacher(t)
	fb, sb := newTeacher(t)
	p := newTestPool(t, []string{sa.URL, sb.URL}, vllm.WithScoreBatch(1, 1000, 2))
	var seqs []scorer.Sequence
	for range 6 {
		seqs = append(seqs, scorer.Sequence{Tokens: []int32{1, 2, 3}, Positions: []int{1, 2}})
	}
	got, err := p.Score(bg, scorer.Request{K: 2, Sequences: seqs})
	require.NoError(t, err)
	require.Len(t, got.Sequences, 6)
	require.Equal(t, 6, len(fa.requests)+len(fb.requests))
	require.NotEmpty(t, fa.requests)
	require.NotEmpty(t, fb.requests)
}

func TestPoolCloseIsIdempotent(t *testing.T) {
	p, err := vllm.NewPool([]string{"http://127.0.0.1:1"})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	require.Len(t, p.Clients(), 1)
}

// hanging answers nothing until the client gives up on the request.
func hanging(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestPoolAttemptTimeoutFailsOver(t *testing.T) {
	// An attempt cut by WithAttemptTimeout is a server failure, although its error
	// also satisfies errors.Is(err, context.DeadlineExceeded): the caller's ctx is
	// still alive.
	hang, hits := hanging(t)
	b := newBackend(t, "b")
	p := newTestPool(t, []string{hang.URL, b.srv.URL}, vllm.WithAttemptTimeout(50*time.Millisecond))
	for range 3 {
		got, err := p.Chat(bg, judgeReq)
		require.NoError(t, err)
		require.Equal(t, []string{"b"}, got.Choices)
	}
	require.Equal(t, int32(1), hits.Load(), "the hanging server was tried once, then skipped")
	require.Equal(t, []string{b.srv.URL}, p.Healthy())
}

func TestPoolBrokenBodyFailsOver(t *testing.T) {
	// A server that drops the connection in the middle of a 200 answer is a server
	// failure too.
	var hits atomic.Int32
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"choices":[`)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(broken.Close)
	b := newBackend(t, "b")
	p := newTestPool(t, []string{broken.URL, b.srv.URL})
	got, err := p.Chat(bg, judgeReq)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, got.Choices)
	require.Equal(t, int32(1), hits.Load())
	require.Equal(t, []string{b.srv.URL}, p.Healthy())
}

func TestPoolCloseEndsItsGoroutines(t *testing.T) {
	a, b := newBackend(t, "a"), newBackend(t, "b")
	before := goleak.IgnoreCurrent()
	p, err := vllm.NewPool([]string{a.srv.URL, b.srv.URL}, vllm.WithModel("m"), vllm.WithHealthCheck(time.Millisecond, time.Second))
	require.NoError(t, err)
	for range 4 {
		_, err := p.Chat(bg, judgeReq)
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())
	// The servers still run: the checker and the kept-alive connections must be gone
	// all the same.
	goleak.VerifyNone(t, before)
}

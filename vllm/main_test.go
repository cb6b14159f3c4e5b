package vllm_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/vllm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// route is one canned answer of a replay server.
type route struct {
	status int
	file   string // under testdata; "" means an empty body
	body   string // used when file is ""
}

// seen is one request a replay server received.
type seen struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// replay serves canned answers per "METHOD /path" and records every request.
type replay struct {
	srv    *httptest.Server
	mu     sync.Mutex
	routes map[string]route
	reqs   []seen
}

func newReplay(t *testing.T, routes map[string]route) *replay {
	t.Helper()
	r := &replay{routes: routes}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replay) serve(w http.ResponseWriter, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	r.mu.Lock()
	r.reqs = append(r.reqs, seen{req.Method, req.URL.Path, req.Header.Clone(), body})
	rt, ok := r.routes[req.Method+" "+req.URL.Path]
	r.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"detail":"Not Found"}`)
		return
	}
	data := []byte(rt.body)
	if rt.file != "" {
		var err error
		data, err = os.ReadFile(filepath.Join("testdata", rt.file))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	if rt.status == 0 {
		rt.status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rt.status)
	_, _ = w.Write(data)
}

// requests returns the requests seen for "METHOD /path".
func (r *replay) requests(key string) []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []seen
	for _, s := range r.reqs {
		if s.Method+" "+s.Path == key {
			out = append(out, s)
		}
	}
	return out
}

// fastRetry keeps test retries quick.
var fastRetry = []vllm.Option{vllm.WithRetryWait(time.Millisecond, 5*time.Millisecond)}

func newTestClient(t *testing.T, url string, opts ...vllm.Option) *vllm.Client {
	t.Helper()
	c, err := vllm.NewClient(url, append(append([]vllm.Option{}, fastRetry...), opts...)...)
	require.NoError(t, err)
	return c
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

var bg = context.Background()

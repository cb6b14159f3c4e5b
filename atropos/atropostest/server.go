package atropostest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/internal/fakehttp"
)

// Server is a running fake trajectory API. Its methods are safe for concurrent use.
type Server struct {
	url    string
	addr   string
	logger *slog.Logger

	life   sync.Mutex // guards ln, hs, done and closed: the process's lifecycle
	ln     net.Listener
	hs     *http.Server
	done   chan struct{}
	closed bool

	mu sync.Mutex
	st state
	// inspection and faults
	received []*atropos.ScoredDataGroup
	served   [][]*atropos.ScoredDataGroup
	log      fakehttp.Log[Request]
	faults   fakehttp.Faults
	down     bool
	holds    map[string][]*Hold // answers to keep back, by path
	restarts int
	gen      int // counts API processes: a request of a killed one changes nothing
}

// state mirrors upstream's app.state.
type state struct {
	queueExists   bool // upstream: the queue attribute exists
	trainerInit   bool // /register ran its initialising branch
	everReset     bool // /reset_data ran on an initialised state: upstream's "started" and "envs" exist
	started       bool // first /batch after /register
	queue         []*entry
	buffer        map[int][]*entry
	envs          []*envState
	currBatch     [][]*entry
	step          int
	batchSize     int
	maxTokenLen   int
	wandbGroup    *string
	wandbProject  *string
	checkpointDir string
	saveInterval  int
	numSteps      int
	requesters    []*big.Int
	latest        *entry
}

type entry struct {
	g     *atropos.ScoredDataGroup
	n     int  // sequences
	envID *int // as posted
}

type envState struct {
	maxContextLen int
	weight        float64
	desiredName   string
	realName      string
	connected     bool
	minAlloc      *float64
	groupSize     int
	lastUpdate    time.Time
}

// Env is a snapshot of one registered env.
type Env struct {
	// ID is the env_id the fake gave the env.
	ID int
	// DesiredName is the name the env asked for at /register-env.
	DesiredName string
	// RealName is the unique name the fake gave it (DesiredName with a suffix).
	RealName string
	// MaxContextLen is the env's max_token_length from /register-env.
	MaxContextLen int
	// Weight is the env's weight from /register-env.
	Weight float64
	// GroupSize is the env's group size; it may grow: /status-env writes back the
	// largest queued size.
	GroupSize int
	// MinBatchAllocation is the share of each batch reserved for the env; nil for none.
	MinBatchAllocation *float64
	// Connected is false once the env called /disconnect-env.
	Connected bool
}

// Option configures a Server.
type Option func(*Server)

// WithTrainer registers a trainer with reg and marks it started (as after its first
// /batch), so envs can register at once.
func WithTrainer(reg atropos.TrainerRegistration) Option {
	return func(s *Server) {
		s.registerTrainer(reg)
		s.st.started = true
	}
}

// WithLogger logs every request at debug level.
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) { s.logger = l }
}

// NewServer starts a fake API on a loopback port and closes it when the test ends.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Start(opts...)
	if err != nil {
		t.Fatalf("atropostest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a fake API on a loopback port. The caller must call [Server.Close].
func Start(opts ...Option) (*Server, error) {
	s := &Server{addr: "127.0.0.1:0", logger: slog.New(slog.DiscardHandler), holds: map[string][]*Hold{}}
	s.st = freshState()
	for _, o := range opts {
		o(s)
	}
	ln, err := listen(s.addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.url, s.addr = "http://"+ln.Addr().String(), ln.Addr().String()
	s.serve(ln)
	return s, nil
}

// WithAddress listens on addr ("127.0.0.1:8000") instead of a free loopback port: a
// test that runs the fake in a process of its own and kills it starts the next one on
// the same address.
func WithAddress(addr string) Option {
	return func(s *Server) { s.addr = addr }
}

// listen listens on addr, trying again for a while: a port just released (a killed
// process, a Restart) may be held briefly.
func listen(addr string) (net.Listener, error) {
	var ln net.Listener
	var err error
	for range 100 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}

// serve starts answering on ln. Called with s.life held, or before s is shared.
func (s *Server) serve(ln net.Listener) {
	hs := &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	s.ln, s.hs, s.done = ln, hs, done
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
}

// stop closes the listener and every connection. Called with s.life held.
func (s *Server) stop() {
	if s.hs == nil {
		return
	}
	_ = s.hs.Close()
	<-s.done
	s.ln, s.hs, s.done = nil, nil, nil
}

// Kill stops the API process: the listener and every connection close (requests in
// flight get no answer; new ones have their connection refused) and all in-memory
// state is lost, as when upstream's run-api is killed. Recorded requests, [Server.Received]
// and [Server.Served] are kept for inspection. [Server.Restart] brings it back.
func (s *Server) Kill() {
	s.life.Lock()
	defer s.life.Unlock()
	s.stop()
	s.mu.Lock()
	s.st = freshState()
	s.gen++
	s.mu.Unlock()
}

// Restart kills the API process (see [Server.Kill]) if it runs and starts a new one on
// the same address with empty state, as upstream's run-api after a restart: no trainer
// (/info answers -1), no envs (env ids are handed out from 0 again), an empty queue and
// step 0. A group posted before the trainer's next /register wedges it, as upstream.
// Restart fails only when the address cannot be bound again.
func (s *Server) Restart() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return errors.New("atropostest: Restart after Close")
	}
	s.stop()
	s.mu.Lock()
	s.st = freshState()
	s.restarts++
	s.gen++
	s.mu.Unlock()
	ln, err := listen(s.addr)
	if err != nil {
		return fmt.Errorf("atropostest: restart: %w", err)
	}
	s.serve(ln)
	return nil
}

// Restarts returns how many times [Server.Restart] started a new API process.
func (s *Server) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

func freshState() state {
	return state{batchSize: -1, maxTokenLen: -1, buffer: map[int][]*entry{}}
}

// URL returns the base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return s.url }

// Close stops the server and closes its connections. It is idempotent.
func (s *Server) Close() {
	s.life.Lock()
	defer s.life.Unlock()
	s.closed = true
	s.stop()
	s.mu.Lock()
	holds := s.holds
	s.holds = map[string][]*Hold{}
	s.mu.Unlock()
	for _, hs := range holds {
		for _, h := range hs {
			h.Release()
		}
	}
}

// RegisterTrainer acts as POST /register with reg (without recording a request).
func (s *Server) RegisterTrainer(reg atropos.TrainerRegistration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registerTrainer(reg)
}

// StartTrainer marks the trainer started, as its first GET /batch does.
func (s *Server) StartTrainer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.started = true
}

// Reset acts as GET /reset_data.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reset()
}

// Received returns every group the API accepted (queued or buffered), in arrival order.
func (s *Server) Received() []*atropos.ScoredDataGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*atropos.ScoredDataGroup(nil), s.received...)
}

// Served returns every batch served by GET /batch, in order.
func (s *Server) Served() [][]*atropos.ScoredDataGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]*atropos.ScoredDataGroup(nil), s.served...)
}

// Queue returns the groups in the queue, oldest first (not the formed batches).
func (s *Server) Queue() []*atropos.ScoredDataGroup {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*atropos.ScoredDataGroup, len(s.st.queue))
	for i, e := range s.st.queue {
		out[i] = e.g
	}
	return out
}

// Buffered returns the number of sequences in env envID's buffer.
func (s *Server) Buffered(envID int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seqs(s.st.buffer[envID])
}

// Step returns the step counter.
func (s *Server) Step() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.step
}

// Envs returns the registered envs, by id.
func (s *Server) Envs() []Env {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Env, len(s.st.envs))
	for i, e := range s.st.envs {
		out[i] = Env{ID: i, DesiredName: e.desiredName, RealName: e.realName, MaxContextLen: e.maxContextLen,
			Weight: e.weight, GroupSize: e.groupSize, MinBatchAllocation: e.minAlloc, Connected: e.connected}
	}
	return out
}

// reply is what a handler produces.
type reply struct {
	status int
	body   []byte
	text   bool // text/plain instead of JSON
}

func jsonReply(v any) reply {
	b, err := json.Marshal(v)
	if err != nil {
		return reply{status: 500, body: []byte("Internal Server Error"), text: true}
	}
	return reply{status: 200, body: b}
}

func errReply(status int, detail string) reply {
	b, _ := json.Marshal(map[string]string{"detail": detail})
	return reply{status: status, body: b}
}

func internalError() reply {
	return reply{status: 500, body: []byte("Internal Server Error"), text: true}
}

// validation422 is FastAPI's shape for a schema error, with one entry.
func validation422(loc []any, msg string) reply {
	b, _ := json.Marshal(map[string]any{"detail": []map[string]any{{"type": "value_error", "loc": loc, "msg": msg}}})
	return reply{status: 422, body: b}
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, rep reply) {
	ctype := "application/json"
	if rep.text {
		ctype = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", ctype)
	body := rep.body
	if len(body) >= 1000 && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(body)
}

// route dispatches a request. Called with s.mu held.
func (s *Server) route(r *http.Request, body []byte) reply {
	type handler struct {
		method string
		fn     func(*http.Request, []byte) reply
	}
	routes := map[string]handler{
		"/":                 {http.MethodGet, func(*http.Request, []byte) reply { return jsonReply(map[string]string{"message": "AtroposLib API"}) }},
		"/register":         {http.MethodPost, s.handleRegister},
		"/register-env":     {http.MethodPost, s.handleRegisterEnv},
		"/disconnect-env":   {http.MethodPost, s.handleDisconnect},
		"/wandb_info":       {http.MethodGet, s.handleWandbInfo},
		"/info":             {http.MethodGet, s.handleInfo},
		"/batch":            {http.MethodGet, s.handleBatch},
		"/latest_example":   {http.MethodGet, s.handleLatest},
		"/scored_data":      {http.MethodPost, s.handleScoredData},
		"/scored_data_list": {http.MethodPost, s.handleScoredDataList},
		"/status":           {http.MethodGet, s.handleStatus},
		"/status-env":       {http.MethodGet, s.handleStatusEnv},
		"/reset_data":       {http.MethodGet, s.handleReset},
	}
	h, ok := routes[r.URL.Path]
	if !ok {
		return errReply(404, "Not Found")
	}
	if r.Method != h.method {
		return errReply(405, "Method Not Allowed")
	}
	return h.fn(r, body)
}

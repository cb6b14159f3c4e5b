package atropostest

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/json"

	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/atropos"
)

// Server is a running fake trajectory API. Its methods are safe for concurrent use.
type Server struct {
	ln     net.Listener
	hs     *http.Server
	url    string
	logger *slog.Logger
	closed sync.Once
	done   chan struct{}

	mu sync.Mutex
	st state
	// inspection and faults
	received []*atropos.ScoredDataGroup
	served   [][]*atropos.ScoredDataGroup
	requests []Request
	faults   map[string]*fault
	down     bool
}

// state mirrors upstream's app.state.
type state struct {
	queueExists   bool // upstream: the queue attribute exists
	trainerInit   bool // /register ran its initialising branch
	everReset     bool // /reset_data ran; uninitialised state now answers 500
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
	ID                 int
	DesiredName        string
	RealName           string
	MaxContextLen      int
	Weight             float64
	GroupSize          int // may grow: /status-env writes back the largest queued size
	MinBatchAllocation *float64
	Connected          bool
}

// Request records one HTTP request the server answered.
type Request struct {
	Method, Path string
	Gzip         bool // the body arrived gzip-encoded
	BodySize     int  // decoded body size
	Status       int
}

type fault struct {
	remaining int // <0: until cleared
	status    int
	body      string
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{
		ln: ln, url: "http://" + ln.Addr().String(), done: make(chan struct{}),
		logger: slog.New(slog.DiscardHandler), faults: map[string]*fault{},
	}
	s.st = freshState()
	for _, o := range opts {
		o(s)
	}
	s.hs = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.hs.Serve(ln)
	}()
	return s, nil
}

func freshState() state {
	return state{batchSize: -1, maxTokenLen: -1, buffer: map[int][]*entry{}}
}

// URL returns the base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return s.url }

// Close stops the server and closes its connections. It is idempotent.
func (s *Server) Close() {
	s.closed.Do(func() {
		_ = s.hs.Close()
		<-s.done
	})
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

// SetError makes every request to path (e.g. "/scored_data"; "*" for all paths) answer
// status with body until ClearErrors. A JSON body is sent as application/json.
func (s *Server) SetError(path string, status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = &fault{remaining: -1, status: status, body: body}
}

// FailNext makes the next n requests to path ("*" for all paths) answer status.
func (s *Server) FailNext(path string, n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = &fault{remaining: n, status: status, body: http.StatusText(status)}
}

// ClearErrors removes every fault set by SetError and FailNext.
func (s *Server) ClearErrors() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
}

// SetDown makes the server drop every connection without an answer (a network error
// for clients) while down is true, as when the API process is gone.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
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

// Requests returns every request answered, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Count returns how many requests with this method and path were answered (including
// injected faults, excluding dropped connections).
func (s *Server) Count(method, path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
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

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	rec := Request{Method: r.Method, Path: r.URL.Path}
	body, err := io.ReadAll(r.Body)
	var rep reply
	switch {
	case err != nil:
		rep = reply{status: 400, body: []byte("bad body"), text: true}
	case strings.Contains(strings.ToLower(r.Header.Get("Content-Encoding")), "gzip"):
		rec.Gzip = true
		zr, zerr := gzip.NewReader(bytes.NewReader(body))
		if zerr == nil {
			body, zerr = io.ReadAll(zr)
		}
		if zerr != nil {
			rep = reply{status: 400, body: []byte("Invalid gzip payload"), text: true}
		}
	}
	rec.BodySize = len(body)
	s.mu.Lock()
	if rep.status == 0 {
		rep = s.injected(r.URL.Path)
	}
	if rep.status == 0 {
		rep = s.route(r, body)
	}
	rec.Status = rep.status
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
	s.logger.Debug("atropostest", "method", rec.Method, "path", rec.Path, "status", rec.Status, "gzip", rec.Gzip, "bytes", rec.BodySize)
	s.write(w, r, rep)
}

// injected returns the fault for path, if any. Called with s.mu held.
func (s *Server) injected(path string) reply {
	for _, key := range []string{path, "*"} {
		f := s.faults[key]
		if f == nil {
			continue
		}
		if f.remaining == 0 {
			delete(s.faults, key)
			continue
		}
		if f.remaining > 0 {
			f.remaining--
		}
		return reply{status: f.status, body: []byte(f.body), text: !json.Valid([]byte(f.body))}
	}
	return reply{}
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

// decodeObject decodes a JSON object body and checks required keys, answering 422 like
// FastAPI otherwise.
func decodeObject(body []byte, required ...string) (map[string]json.RawMessage, reply) {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, validation422([]any{"body"}, "Field required")
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, validation422([]any{"body"}, "JSON decode error: "+err.Error())
	}
	for _, k := range required {
		if v, ok := m[k]; !ok || string(v) == "null" {
			return nil, validation422([]any{"body", k}, "Field required")
		}
	}
	return m, reply{}
}

func (s *Server) handleRegister(_ *http.Request, body []byte) reply {
	var reg atropos.TrainerRegistration
	m, rep := decodeObject(body, "wandb_group", "wandb_project", "batch_size", "max_token_len",
		"checkpoint_dir", "save_checkpoint_interval", "starting_step", "num_steps")
	if m == nil {
		return rep
	}
	if err := json.Unmarshal(body, &reg); err != nil {
		return validation422([]any{"body"}, err.Error())
	}
	id := s.registerTrainer(reg)
	return reply{status: 200, body: fmt.Appendf(nil, `{"uuid":%s}`, id.String())}
}

// registerTrainer runs /register. Called with s.mu held (or before serving).
func (s *Server) registerTrainer(reg atropos.TrainerRegistration) *big.Int {
	if !s.st.queueExists {
		s.st.queueExists = true
		s.st.trainerInit = true
		s.st.queue = nil
		s.st.buffer = map[int][]*entry{}
		s.st.envs = nil
		s.st.currBatch = nil
		s.st.started = false
		s.st.batchSize = reg.BatchSize
		s.st.maxTokenLen = reg.MaxTokenLen
		s.st.step = reg.StartingStep
		g, p := reg.WandbGroup, reg.WandbProject
		s.st.wandbGroup, s.st.wandbProject = &g, &p
		s.st.checkpointDir = reg.CheckpointDir
		s.st.saveInterval = reg.SaveCheckpointInterval
		s.st.numSteps = reg.NumSteps
	}
	id, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	s.st.requesters = append(s.st.requesters, id)
	return id
}

func (s *Server) handleRegisterEnv(_ *http.Request, body []byte) reply {
	m, rep := decodeObject(body, "max_token_length", "desired_name", "weight", "group_size")
	if m == nil {
		return rep
	}
	var req struct {
		MaxTokenLength     int      `json:"max_token_length"`
		DesiredName        string   `json:"desired_name"`
		Weight             float64  `json:"weight"`
		GroupSize          int      `json:"group_size"`
		MinBatchAllocation *float64 `json:"min_batch_allocation"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return validation422([]any{"body"}, err.Error())
	}
	if !s.st.started {
		return jsonReply(map[string]string{"status": "wait for trainer to start"})
	}
	same := 0
	for _, e := range s.st.envs {
		if e.desiredName == req.DesiredName {
			same++
		}
	}
	e := &envState{
		maxContextLen: req.MaxTokenLength, weight: req.Weight, desiredName: req.DesiredName,
		realName: fmt.Sprintf("%s_%d", req.DesiredName, same), connected: true,
		minAlloc: req.MinBatchAllocation, groupSize: req.GroupSize, lastUpdate: time.Now(),
	}
	s.st.envs = append(s.st.envs, e)
	return jsonReply(map[string]any{
		"status": "success", "env_id": len(s.st.envs) - 1, "wandb_name": e.realName,
		"checkpoint_dir": s.st.checkpointDir, "starting_step": s.st.step,
		"checkpoint_interval": s.st.saveInterval, "num_steps": s.st.numSteps,
	})
}

func (s *Server) handleDisconnect(_ *http.Request, body []byte) reply {
	m, rep := decodeObject(body, "env_id")
	if m == nil {
		return rep
	}
	var id int
	if err := json.Unmarshal(m["env_id"], &id); err != nil {
		return validation422([]any{"body", "env_id"}, "Input should be a valid integer")
	}
	if id < 0 || id >= len(s.st.envs) {
		return jsonReply(map[string]string{"status": "failure", "error": "list index out of range"})
	}
	s.st.envs[id].connected = false
	return jsonReply(map[string]string{"status": "success"})
}

func (s *Server) handleWandbInfo(*http.Request, []byte) reply {
	return jsonReply(map[string]*string{"group": s.st.wandbGroup, "project": s.st.wandbProject})
}

func (s *Server) handleInfo(*http.Request, []byte) reply {
	return jsonReply(map[string]int{"batch_size": s.st.batchSize, "max_token_len": s.st.maxTokenLen})
}

func (s *Server) handleStatus(*http.Request, []byte) reply {
	if !s.st.trainerInit {
		return jsonReply(map[string]int{"current_step": 0, "queue_size": 0})
	}
	return jsonReply(map[string]int{"current_step": s.st.step, "queue_size": len(s.st.queue)})
}

func (s *Server) handleReset(*http.Request, []byte) reply {
	s.reset()
	return reply{status: 200, body: []byte("Reset successful"), text: true}
}

// reset drops queue and envs; max_token_len survives, as upstream. Called with s.mu held.
func (s *Server) reset() {
	mtl := s.st.maxTokenLen
	s.st = freshState()
	s.st.maxTokenLen = mtl
	s.st.everReset = true
}

func (s *Server) handleLatest(*http.Request, []byte) reply {
	if s.st.latest == nil {
		return reply{status: 200, body: []byte(`{"tokens":[],"masks":[],"scores":[],"advantages":[],"ref_logprobs":[],"generation_params":[],"inference_logprobs":[],"messages":[],"images":[]}`)}
	}
	b, err := s.st.latest.g.MarshalJSON()
	if err != nil {
		return internalError()
	}
	return reply{status: 200, body: b}
}

// parseGroup decodes one posted group, answering 422 like pydantic on failure.
func parseGroup(raw []byte, loc ...any) (*atropos.ScoredDataGroup, reply) {
	var probe struct {
		Messages [][]map[string]json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(raw, &probe) == nil {
		for i, seq := range probe.Messages {
			for j, m := range seq {
				_, hasRole := m["role"]
				_, hasContent := m["content"]
				if !hasRole || !hasContent {
					return nil, validation422(append(append([]any{}, loc...), "messages", i, j), "Value error, Message must have 'role' and 'content' fields")
				}
			}
		}
	}
	g := new(atropos.ScoredDataGroup)
	if err := g.UnmarshalJSON(raw); err != nil {
		return nil, validation422(loc, err.Error())
	}
	return g, reply{}
}

func (s *Server) handleScoredData(_ *http.Request, body []byte) reply {
	g, rep := parseGroup(body, "body")
	if g == nil {
		return rep
	}
	buffered, size := s.ingest(g)
	if buffered {
		return jsonReply(map[string]any{"status": "buffered", "buffer_size": size})
	}
	return jsonReply(map[string]string{"status": "received"})
}

func (s *Server) handleScoredDataList(_ *http.Request, body []byte) reply {
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return validation422([]any{"body"}, "Input should be a valid list")
	}
	groups := make([]*atropos.ScoredDataGroup, len(raws))
	for i, raw := range raws {
		g, rep := parseGroup(raw, "body", i)
		if g == nil {
			return rep
		}
		groups[i] = g
	}
	out := map[string]any{"status": "received", "groups_processed": len(groups)}
	nbuf, last := 0, 0
	for _, g := range groups {
		if b, size := s.ingest(g); b {
			nbuf++
			last = size
		}
	}
	if nbuf > 0 {
		out["buffered"] = nbuf
		out["last_buffer_size"] = last
	}
	return jsonReply(out)
}

// ingest queues or buffers one group and reports whether it was buffered, with the
// env's remaining buffer size. Called with s.mu held.
func (s *Server) ingest(g *atropos.ScoredDataGroup) (bool, int) {
	s.received = append(s.received, g)
	s.st.queueExists = true // data before a trainer registered creates the queue: the wedge
	e := &entry{g: g, n: g.Len(), envID: g.EnvID}
	if e.envID != nil && *e.envID >= 0 && *e.envID < len(s.st.envs) && e.n != s.st.envs[*e.envID].groupSize {
		id := *e.envID
		buf := append(s.st.buffer[id], e)
		pick := exactSubset(buf, s.st.envs[id].groupSize)
		if pick != nil {
			var rest []*entry
			for i, b := range buf {
				if pick[i] {
					s.st.queue = append(s.st.queue, b)
					s.st.latest = b
				} else {
					rest = append(rest, b)
				}
			}
			buf = rest
		}
		s.st.buffer[id] = buf
		return true, seqs(buf)
	}
	s.st.queue = append(s.st.queue, e)
	s.st.latest = e
	return false, 0
}

// exactSubset returns which buffered groups to release so that their sizes sum to
// target: first greedily in FIFO order, then by a search preferring earlier groups;
// nil when no subset sums to target.
func exactSubset(buf []*entry, target int) []bool {
	pick := make([]bool, len(buf))
	sum := 0
	for i, e := range buf {
		if sum+e.n <= target {
			pick[i] = true
			sum += e.n
		}
		if sum == target {
			return pick
		}
	}
	clear(pick)
	var search func(i, left int) bool
	search = func(i, left int) bool {
		if left == 0 {
			return true
		}
		for j := i; j < len(buf); j++ {
			if buf[j].n <= left {
				pick[j] = true
				if search(j+1, left-buf[j].n) {
					return true
				}
				pick[j] = false
			}
		}
		return false
	}
	if search(0, target) {
		return pick
	}
	return nil
}

func seqs(es []*entry) int {
	n := 0
	for _, e := range es {
		n += e.n
	}
	return n
}

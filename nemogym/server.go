package nemogym

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd/tasks"
)

// Failures says how the agent server reports a rollout it could not carry out.
type Failures int

const (
	// FailStatus (the default) answers with an HTTP status that classifies the
	// failure, as NeMo RL reads it: 500 for a rollout that failed (the model server,
	// the sandbox, the verifier: retried as an infrastructure failure), 422 with the
	// reason for a row this server cannot use or a prompt longer than the engine's
	// context (data failures: NeMo RL gives them its small data budget and reports
	// them). A 200 failure row would reach NeMo RL's post-processing, which rejects
	// it as data.
	FailStatus Failures = iota
	// FailRow answers 200 with a failure row (reward 0, _ng_failure_class, error), as
	// NeMo Gym's standalone collector wants: any other status aborts its whole run.
	// Failed rollouts get class "rollout_failed" and are retried on resume; bad rows
	// get "bad_row", context overflows "context_overflow" and rollouts past
	// Config.RolloutTimeout "timeout_exceeded", all three with _ng_failure_terminal
	// (never retried).
	FailRow
)

// Failure classes of [FailRow] answers.
const (
	ClassRolloutFailed = "rollout_failed"
	ClassBadRow        = "bad_row"
	ClassTimeout       = "timeout_exceeded" // NeMo Gym's name for a rollout past its deadline
	// ClassContextOverflow is a rollout whose prompt the engine refused as longer
	// than its context ([ErrContextOverflow]): a data failure, terminal.
	ClassContextOverflow = "context_overflow"
)

// Config configures a [Server]. The zero value of every field but Runner is a
// documented default.
type Config struct {
	// Runner runs each rollout. Required.
	Runner Runner
	// Tasks are the tasks rows may name by "task_id"; rows can also carry the whole
	// task under "task".
	Tasks []tasks.Task
	// Failures is the failure reporting; the zero value is FailStatus (NeMo RL's).
	Failures Failures
	// Model is the "model" of the responses; "" means the row's, else "policy".
	Model string
	// KeepBytes bounds the finished answers kept to answer a duplicate /run (a
	// long rollout's answer is a few MB: every call's prompt ids); the oldest go
	// first. 0 means 64 MiB, negative keeps none.
	KeepBytes int64
	// RolloutTimeout bounds one rollout, from its start to its answer; a rollout
	// past it fails (500, or class "timeout_exceeded", terminal). 0 means no bound: NeMo Gym's
	// collector has none, and a stalled model server then holds the rollout (and its
	// sandbox) until the client goes away.
	RolloutTimeout time.Duration
	// MaxBodyBytes bounds a /run body; 0 means 64 MiB.
	MaxBodyBytes int64
	// Logger receives a record per failed rollout; nil logs nothing.
	Logger *slog.Logger
}

// Server is a NeMo Gym agent server: an [http.Handler] serving POST /run (one
// rollout per row), GET / (readiness) and POST /aggregate_metrics ({}: NeMo Gym
// computes its own). It is safe for concurrent use.
//
// Duplicate /run: NeMo Gym's client re-sends a /run whose connection dropped. A row
// with _ng_task_index and _ng_rollout_index is keyed by them (and _ng_attempt_index):
// a duplicate that arrives while the rollout runs waits for the same rollout, and
// one that arrives after it succeeded gets the same result again (the last
// answers within KeepBytes are kept), so one rollout is run and scored once. Failures are not
// kept: a retry runs again. Rows without a rollout index (NeMo RL's) cannot be told
// apart from the group's other copies and each runs its own rollout.
//
// A rollout runs as long as one request waits for it: when every client that asked
// for it has gone (a disconnect), its context is canceled, which ends the agent
// loop and releases its sandbox.
//
// Answers are written into buffers the Server reuses once no request writes them and
// they are not kept; between answers it holds at most four of them (64 MiB in all).
type Server struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	flights map[runKey]*flight
	done    map[runKey]*answer
	order   []runKey
	kept    int64 // bytes in done
	ids     uint64
	wg      sync.WaitGroup

	free      [][]byte // answer buffers no answer holds any more, oldest first
	freeBytes int      // their capacity
}

// Answer buffers kept for the next answers: about as many as are written at once,
// and few enough bytes for a server at rest to hold.
const (
	maxFree      = 4
	maxFreeBytes = 64 << 20
)

// Wait blocks until every rollout the Server started has ended. A rollout ends when
// it finishes or when every request that waited for it has gone; call Wait after
// shutting the HTTP server down (http.Server.Shutdown waits for the requests).
func (s *Server) Wait() { s.wg.Wait() }

type runKey struct{ task, rollout, attempt int64 }

// flight is one running rollout and the requests waiting for it.
type flight struct {
	waiters int
	cancel  context.CancelFunc
	done    chan struct{}
	ans     *answer // set, under Server.mu, before done is closed
}

// answer is a rollout's answer to /run. A rollout's answer is a buffer of a few MB,
// which the Server takes from s.free and puts back there when no one holds it any
// more, so that the next answer is written without allocating (and zeroing) one:
// refs counts the holders, under Server.mu. They are the flight's waiters together
// (one hold, dropped by the last of them to leave), s.done while it keeps the answer,
// and each duplicate /run writing the kept answer; a buffer is never put back while
// one of them may still read it.
type answer struct {
	body   []byte
	status int
	pooled bool // body goes back to s.free when no one holds it; cleared by leavesWrite
	refs   int
}

// NewServer returns a Server for cfg. It does no I/O.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Runner == nil {
		return nil, errors.New("nemogym: NewServer: Runner is required")
	}
	if cfg.Failures != FailStatus && cfg.Failures != FailRow {
		return nil, fmt.Errorf("nemogym: NewServer: unknown Failures %d", cfg.Failures)
	}
	if cfg.KeepBytes == 0 {
		cfg.KeepBytes = 64 << 20
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 20
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log, flights: map[runKey]*flight{}, done: map[runKey]*answer{}}, nil
}

// ServeHTTP implements [http.Handler].
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
	case r.URL.Path == "/run" && r.Method == http.MethodPost:
		s.run(w, r)
	case r.URL.Path == "/aggregate_metrics" && r.Method == http.MethodPost:
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, s.cfg.MaxBodyBytes))
		writeJSON(w, http.StatusOK, []byte(`{}`))
	case r.URL.Path == "/" || r.URL.Path == "/run" || r.URL.Path == "/aggregate_metrics":
		writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"detail":"Method Not Allowed"}`))
	default:
		writeJSON(w, http.StatusNotFound, []byte(`{"detail":"Not Found"}`))
	}
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		s.reject(w, nil, fmt.Errorf("%w: reading the body: %v", ErrBadRow, err))
		return
	}
	row, err := ParseRow(body, s.cfg.Tasks)
	if err != nil {
		s.reject(w, row, err)
		return
	}
	key, keyed := rowKey(row)
	s.mu.Lock()
	if keyed {
		if a, ok := s.done[key]; ok {
			a.refs++
			a.pooled = a.pooled && !leavesWrite(r)
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, a.body)
			s.mu.Lock()
			s.release(a)
			s.mu.Unlock()
			return
		}
	}
	f := s.flights[key]
	if !keyed || f == nil {
		ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
		f = &flight{cancel: cancel, done: make(chan struct{})}
		if keyed {
			s.flights[key] = f
		}
		s.ids++
		id := s.ids
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.rollout(ctx, f, row, key, keyed, id)
		}()
	}
	f.waiters++
	s.mu.Unlock()

	select {
	case <-f.done:
		if leavesWrite(r) {
			s.mu.Lock()
			f.ans.pooled = false
			s.mu.Unlock()
		}
		writeJSON(w, f.ans.status, f.ans.body)
	case <-r.Context().Done():
	}
	s.mu.Lock()
	f.waiters--
	if f.waiters == 0 {
		f.cancel() // nobody waits for it any more: a later duplicate starts afresh
		if keyed && s.flights[key] == f {
			delete(s.flights, key)
		}
		if f.ans != nil {
			s.release(f.ans) // the waiters' hold
		}
	}
	s.mu.Unlock()
}

// rollout runs one row and publishes its answer in f.
func (s *Server) rollout(ctx context.Context, f *flight, row *Row, key runKey, keyed bool, id uint64) {
	defer f.cancel()
	if s.cfg.RolloutTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.cfg.RolloutTimeout, errRolloutTimeout)
		defer cancel()
	}
	sess := NewSession(row.Sampling)
	sess.rolloutID = row.RolloutID
	out, err := s.cfg.Runner.RunOne(WithSession(ctx, sess), row.Task)
	a := &answer{status: http.StatusOK}
	if err == nil {
		a.body, err = s.result(row, out, id)
		a.pooled = err == nil
	}
	if err != nil {
		class := ClassRolloutFailed
		switch {
		case errors.Is(err, ErrContextOverflow) || sess.ContextOverflow():
			class = ClassContextOverflow
		case errors.Is(context.Cause(ctx), errRolloutTimeout):
			class, err = ClassTimeout, fmt.Errorf("%w (%v): %w", errRolloutTimeout, s.cfg.RolloutTimeout, err)
		}
		if ctx.Err() == nil || class == ClassTimeout {
			s.log.Warn("nemogym: rollout failed", "task", row.Task.ID, "class", class, "err", err)
		}
		a.status, a.body = s.failure(row, class, err)
	}
	s.mu.Lock()
	if keyed {
		if s.flights[key] == f {
			delete(s.flights, key)
		}
		// An answer already kept for the key (from a rollout whose waiters had all
		// gone, yet finished) stays the one duplicates get.
		if _, kept := s.done[key]; !kept && err == nil && int64(len(a.body)) <= s.cfg.KeepBytes {
			s.done[key] = a
			a.refs++ // s.done's hold
			s.order = append(s.order, key)
			s.kept += int64(len(a.body))
			for s.kept > s.cfg.KeepBytes {
				old := s.done[s.order[0]]
				s.kept -= int64(len(old.body))
				delete(s.done, s.order[0])
				s.order = s.order[1:]
				s.release(old)
			}
		}
	}
	f.ans = a
	if f.waiters > 0 {
		a.refs++ // the waiters' hold
	}
	if a.refs == 0 {
		s.recycle(a) // nobody will write it
	}
	s.mu.Unlock()
	close(f.done)
}

// leavesWrite reports whether r's ResponseWriter may return from a Write before it is
// done reading the bytes: HTTP/2's returns when the stream or the connection closes
// under a frame still being written. A body written to one is never reused.
func leavesWrite(r *http.Request) bool { return r.ProtoMajor >= 2 }

// release drops one hold on a, and puts its buffer back in s.free when it was the
// last. s.mu must be held.
func (s *Server) release(a *answer) {
	a.refs--
	if a.refs == 0 {
		s.recycle(a)
	}
}

// recycle puts a's buffer, which no one holds, back in s.free. s.mu must be held.
func (s *Server) recycle(a *answer) {
	if a.pooled {
		s.putBuffer(a.body)
	}
	a.body, a.pooled = nil, false
}

// putBuffer keeps b for a later answer, and lets the oldest kept buffers go past
// maxFree buffers or maxFreeBytes. s.mu must be held.
func (s *Server) putBuffer(b []byte) {
	if cap(b) > maxFreeBytes {
		return
	}
	s.free = append(s.free, b[:0])
	s.freeBytes += cap(b)
	for len(s.free) > maxFree || s.freeBytes > maxFreeBytes {
		s.freeBytes -= cap(s.free[0])
		s.free[0] = nil
		s.free = s.free[1:]
	}
}

// buffer returns an empty buffer for an answer of at most about n bytes: a kept one
// from n to 2n bytes long (so that a kept answer holds no more memory than about
// twice its length), else a new one.
func (s *Server) buffer(n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.free {
		if c := cap(b); c >= n && c <= 2*n {
			s.free = slices.Delete(s.free, i, i+1)
			s.freeBytes -= c
			return b
		}
	}
	return make([]byte, 0, n)
}

func (s *Server) result(row *Row, out Outcome, id uint64) ([]byte, error) {
	if !RewardSumOK(out.Reward, out.Components) {
		return nil, fmt.Errorf("%w: reward %v, components %v", ErrRewardSum, out.Reward, out.Components)
	}
	model := s.cfg.Model
	if model == "" {
		if json.Unmarshal(row.Params["model"], &model) != nil || model == "" {
			model = "policy"
		}
	}
	resp, err := response(fmt.Sprintf("resp_%d", id), float64(time.Now().Unix()), model, row.Params, out, false)
	if err != nil {
		return nil, err
	}
	res := &Result{
		Row: row.Fields, ResponsesCreateParams: row.Fields["responses_create_params"], Response: resp,
		Reward: out.Reward, RewardComponents: out.Components,
	}
	ids := newIDText(out.Trajectory.Tokens)
	var rows *turnRows
	if out.Rows != nil {
		rows = &turnRows{rows: out.Rows, turns: out.Trajectory.Turns}
	}
	buf := s.buffer(sizeHint(resp, ids, rows))
	b, err := res.appendJSON(buf, ids, rows)
	if err != nil {
		s.mu.Lock()
		s.putBuffer(buf)
		s.mu.Unlock()
	}
	return b, err
}

// reject answers a row this server cannot use.
func (s *Server) reject(w http.ResponseWriter, row *Row, err error) {
	status, body := s.failure(row, ClassBadRow, err)
	writeJSON(w, status, body)
}

// failure is the answer for err under the configured reporting.
func (s *Server) failure(row *Row, class string, err error) (int, []byte) {
	bad := errors.Is(err, ErrBadRow)
	// A data failure fails the same way on every attempt: a row this server cannot
	// use, or a prompt longer than the engine's context (NeMo RL's failures.py names
	// that one a data failure).
	data := bad || class == ClassContextOverflow
	if s.cfg.Failures == FailStatus {
		if data {
			b, _ := json.Marshal(map[string]string{"detail": err.Error()})
			return http.StatusUnprocessableEntity, b
		}
		b, _ := json.Marshal(err.Error()) // a JSON string, as Python servers answer a 500
		return http.StatusInternalServerError, b
	}
	// NeMo Gym never retries a terminal failure on resume: a data failure, or a
	// rollout past its deadline (timeout_exceeded is one of its terminal classes).
	res := &Result{FailureClass: class, Error: err.Error(), Terminal: data || class == ClassTimeout}
	if bad {
		res.FailureClass = ClassBadRow
	}
	if row != nil {
		res.Row, res.ResponsesCreateParams = row.Fields, row.Fields["responses_create_params"]
	}
	b, mErr := res.AppendJSON(nil)
	if mErr != nil {
		b, _ = json.Marshal(mErr.Error())
		return http.StatusInternalServerError, b
	}
	return http.StatusOK, b
}

var errRolloutTimeout = errors.New("nemogym: the rollout ran past Config.RolloutTimeout")

func rowKey(r *Row) (runKey, bool) {
	if r.TaskIndex == nil || r.RolloutIndex == nil {
		return runKey{}, false
	}
	return runKey{*r.TaskIndex, *r.RolloutIndex, r.Attempt}, true
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// sizeHint is about the length of a response's JSON, so that it is written into one
// buffer: about 7 bytes per id and 12 per logprob, and the length of the runs of ids
// copied from ids' text; the teacher rows of rows count as those of TeacherRows do.
func sizeHint(r *Response, ids *idText, rows *turnRows) int {
	n := 4 << 10
	calls := 0 // items with token fields so far
	for i := range r.Output {
		it := &r.Output[i]
		for _, c := range it.Content {
			n += len(c.Text) + 64
		}
		if it.Output != nil {
			n += len(*it.Output) + 64
		}
		if t := it.TokenInfo; t != nil {
			for i, l := range [][]int32{t.PromptTokenIDs, t.GenerationTokenIDs} {
				if text, ok := ids.run(l, i*len(t.PromptTokenIDs)); ok {
					n += len(text) + 2
				} else {
					n += 7 * len(l)
				}
			}
			n += 12 * len(t.GenerationLogProbs)
		}
		if t := it.TeacherRows; t != nil {
			for j := range t.TokenIDs {
				n += 3 + 7*len(t.TokenIDs[j]) + 12*len(t.Logprobs[j])
			}
		} else if it.TokenInfo != nil && rows != nil && calls < len(rows.turns) {
			turn := rows.turns[calls]
			n += 3*(turn.End-turn.Start) + 19*int(rows.rows.Offsets[turn.End]-rows.rows.Offsets[turn.Start])
		}
		if it.TokenInfo != nil {
			calls++
		}
	}
	return n
}

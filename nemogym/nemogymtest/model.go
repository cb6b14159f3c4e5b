package nemogymtest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/vllm"
)

// ModelConfig configures a [ModelServer].
type ModelConfig struct {
	// Backend is the engine behind the server (a vllmtest simulator's client, say): its
	// /tokenize renders the chat template, its /v1/completions generates from the
	// spliced token-id prompt. Required.
	Backend *vllm.Client
	// EOS is the id that closes every message of the template (<|im_end|> for the
	// simulator). Required.
	EOS int32
	// Temperature and TopP are the trainer's training pair; every call must state them
	// (or the validation pair, when ValTemperature or ValTopP is set).
	Temperature, TopP       float64
	ValTemperature, ValTopP float64
	// MaxModelLen is the context length; 0 means the backend's.
	MaxModelLen int
	// Answer, when set, may change a call's token fields before they are sent (fault
	// injection: a non-contiguous prompt, a lost logprob, a partial bundle).
	Answer func(call int, a *Answer)
}

// Answer is what a model call returns on choices[0].message. A nil field is left out
// of the answer.
type Answer struct {
	Content            *string
	PromptTokenIDs     []int32
	GenerationTokenIDs []int32
	GenerationLogProbs []float64
	FinishReason       string
}

// ModelServer is an in-process fake of the model path of NeMo Gym under NeMo RL: the
// Gym model server in training mode (return_token_id_information) in front of NeMo
// RL's OpenAI-compatible server, on a loopback port. The Gym hop is modelled: only the
// chat parameters Gym declares pass (top_k, min_p and the like only through
// metadata.extra_body), logprobs are forced on with top_logprobs 0. It serves POST
// /v1/chat/completions, POST /tokenize and GET /v1/models (the trainer's, passed to the backend) and
// GET /, and does what the real pair does and checks:
//
//   - n other than 1, top_k other than unset or −1, top_p missing, or a (temperature,
//     top_p) pair that is not the trainer's: 500 (NeMo RL's asserts);
//   - token fields on a message that are not all three (prompt_token_ids,
//     generation_token_ids, generation_log_probs): 422 (Gym's atomic validator);
//   - replayed token fields that differ from what this server answered: 400 (the real
//     server would splice them silently; the fake refuses, to catch the agent);
//   - the prompt: the last message with token fields gives the prefix, the chat
//     template renders the rest, and the two are spliced by counting EOS tokens as
//     NeMo RL's replace_prefix_tokens does (500 when the n-th EOS is missing); a prompt
//     that fills the context: an empty completion without token fields,
//     finish_reason "length" (NeMo RL's 400 as Gym's model server answers it);
//   - the answer carries the three token fields on the message, logprobs floored at
//     −9999 (content is the generated text as is: no tool-call parser);
//   - a path under NeMo Gym's per-rollout prefix, /ng-rollout/<id>/..., is served as
//     the path without it, and the id is recorded ([ModelServer.RolloutIDs]).
//
// Fault injection: [ModelServer.SetError], [ModelServer.Stall]. It is safe for
// concurrent use; Close it (NewModelServer registers that with the test).
type ModelServer struct {
	// URL is the base URL, without a trailing slash.
	URL string

	cfg   ModelConfig
	srv   *http.Server
	proxy *httputil.ReverseProxy
	tr    *http.Transport // the proxy's own: a pooled connection never outlives this server
	close sync.Once

	calls    atomic.Int64
	mu       sync.Mutex
	ids      []string // each chat call's rollout id, "" for none
	emitted  map[[32]byte]bool
	errs     []int
	stall    chan struct{}
	inflight sync.WaitGroup
}

// StartModelServer starts a ModelServer; the caller must Close it.
func StartModelServer(cfg ModelConfig) (*ModelServer, error) {
	if cfg.Backend == nil {
		return nil, errors.New("nemogymtest: ModelConfig.Backend is required")
	}
	base, err := url.Parse(cfg.Backend.BaseURL())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &ModelServer{URL: "http://" + ln.Addr().String(), cfg: cfg, emitted: map[[32]byte]bool{},
		proxy: httputil.NewSingleHostReverseProxy(base), tr: &http.Transport{}}
	m.proxy.Transport = m.tr
	m.srv = &http.Server{Handler: http.HandlerFunc(m.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// NewModelServer starts a ModelServer for a test and closes it when the test ends.
func NewModelServer(t interface {
	Helper()
	Fatalf(string, ...any)
	Cleanup(func())
}, cfg ModelConfig) *ModelServer {
	t.Helper()
	m, err := StartModelServer(cfg)
	if err != nil {
		t.Fatalf("nemogymtest: %v", err)
	}
	t.Cleanup(m.Close)
	return m
}

// Close stops the server and waits for its handlers; it is idempotent. A stalled
// call is released.
func (m *ModelServer) Close() {
	m.close.Do(func() {
		m.mu.Lock()
		if m.stall != nil {
			close(m.stall)
			m.stall = nil
		}
		m.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.srv.Shutdown(ctx)
		m.inflight.Wait()
		m.tr.CloseIdleConnections()
	})
}

// Calls returns the number of chat completion requests received.
func (m *ModelServer) Calls() int64 { return m.calls.Load() }

// RolloutIDs returns the rollout id each chat completion request carried in its
// /ng-rollout/<id>/ path prefix, in the order they arrived; "" for a request
// without the prefix.
func (m *ModelServer) RolloutIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ids)
}

// rolloutPrefix matches NeMo Gym's per-rollout path prefix: the id is one segment of
// letters, digits, dots, dashes and underscores that begins with a letter or digit,
// and a path must follow it.
var rolloutPrefix = regexp.MustCompile(`^/ng-rollout/([A-Za-z0-9][A-Za-z0-9._-]*)(/.*)$`)

// SetError makes the next calls answer with the given statuses, one per call, in
// order, before any work (as an upstream failure reaches the agent).
func (m *ModelServer) SetError(statuses ...int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, statuses...)
}

// Stall makes every call wait until its client goes away or the returned function
// is called.
func (m *ModelServer) Stall() (release func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{})
	m.stall = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			if m.stall == ch {
				close(ch)
				m.stall = nil
			}
			m.mu.Unlock()
		})
	}
}

func (m *ModelServer) serve(w http.ResponseWriter, r *http.Request) {
	// NeMo Gym's servers strip the per-rollout prefix before routing (a path whose
	// id does not match is routed as it is: not found).
	id := ""
	if p := rolloutPrefix.FindStringSubmatch(r.URL.Path); p != nil {
		id = p[1]
		r.URL.Path, r.URL.RawPath = p[2], ""
	}
	switch {
	case r.URL.Path == "/" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case r.URL.Path == "/tokenize" || r.URL.Path == "/v1/models":
		m.proxy.ServeHTTP(w, r)
	case r.URL.Path == "/v1/chat/completions" && r.Method == http.MethodPost:
		m.inflight.Add(1)
		defer m.inflight.Done()
		m.mu.Lock()
		m.ids = append(m.ids, id)
		m.mu.Unlock()
		m.chat(w, r)
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
	}
}

type chatRequest struct {
	Model              string            `json:"model"`
	Messages           []json.RawMessage `json:"messages"`
	Tools              []chat.Tool       `json:"tools"`
	N                  *int              `json:"n"`
	MaxTokens          *int              `json:"max_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	TopK               *int              `json:"top_k"`
	MinP               float64           `json:"min_p"`
	RepetitionPenalty  float64           `json:"repetition_penalty"`
	PresencePenalty    float64           `json:"presence_penalty"`
	FrequencyPenalty   float64           `json:"frequency_penalty"`
	Seed               *int64            `json:"seed"`
	Logprobs           bool              `json:"logprobs"`
	TopLogprobs        *int              `json:"top_logprobs"`
	ChatTemplateKwargs map[string]any    `json:"chat_template_kwargs"`
}

// bundle is a message's token fields as sent.
type bundle struct {
	Prompt   *[]int32   `json:"prompt_token_ids"`
	Gen      *[]int32   `json:"generation_token_ids"`
	Logprobs *[]float32 `json:"generation_log_probs"`
}

func (b bundle) count() int {
	n := 0
	for _, p := range []bool{b.Prompt != nil, b.Gen != nil, b.Logprobs != nil} {
		if p {
			n++
		}
	}
	return n
}

func bundleKey(prompt, gen []int32, lps []float32) [32]byte {
	b, _ := json.Marshal([]any{prompt, gen, lps})
	return sha256.Sum256(b)
}

func (m *ModelServer) chat(w http.ResponseWriter, r *http.Request) {
	call := int(m.calls.Add(1))
	m.mu.Lock()
	stall := m.stall
	var injected int
	if len(m.errs) > 0 {
		injected, m.errs = m.errs[0], m.errs[1:]
	}
	m.mu.Unlock()
	if stall != nil {
		select {
		case <-stall:
		case <-r.Context().Done():
			return
		}
	}
	if injected != 0 {
		writeJSON(w, injected, fmt.Sprintf("injected failure %d", injected))
		return
	}
	body, err := io.ReadAll(r.Body)
	var req chatRequest
	if err == nil {
		body, err = gymHop(body)
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeDetail(w, http.StatusUnprocessableEntity, "invalid JSON body: "+fmt.Sprint(err))
		return
	}
	if status, msg := m.checkSampling(&req); status != 0 {
		writeDetail(w, status, msg)
		return
	}
	msgs, prefix, status, msg := m.readMessages(req.Messages)
	if status != 0 {
		writeDetail(w, status, msg)
		return
	}
	prompt, status, msg := m.splice(r.Context(), &req, msgs, prefix)
	if status != 0 {
		writeDetail(w, status, msg)
		return
	}
	m.generate(w, r.Context(), call, &req, prompt)
}

// gymFields are the chat parameters NeMo Gym's model server declares; it drops
// every other top-level key.
var gymFields = map[string]bool{"messages": true, "model": true, "audio": true, "frequency_penalty": true,
	"logit_bias": true, "logprobs": true, "max_completion_tokens": true, "max_tokens": true, "metadata": true,
	"modalities": true, "n": true, "parallel_tool_calls": true, "prediction": true, "presence_penalty": true,
	"reasoning_effort": true, "response_format": true, "seed": true, "service_tier": true, "stop": true,
	"store": true, "stream_options": true, "temperature": true, "tool_choice": true, "tools": true,
	"top_logprobs": true, "top_p": true, "user": true, "web_search_options": true, "stream": true}

// gymHop does to a body what NeMo Gym's model server does before the trainer's
// server sees it: unknown top-level keys dropped, metadata.extra_body (a JSON string)
// merged under the request, metadata.chat_template_kwargs made chat_template_kwargs,
// logprobs forced on with top_logprobs 0.
func gymHop(body []byte) ([]byte, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	var meta map[string]string
	if raw, ok := in["metadata"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("metadata must map strings to strings: %w", err)
		}
	}
	if eb := meta["extra_body"]; eb != "" {
		if err := json.Unmarshal([]byte(eb), &out); err != nil {
			return nil, fmt.Errorf("metadata.extra_body: %w", err)
		}
	}
	if kw := meta["chat_template_kwargs"]; kw != "" {
		out["chat_template_kwargs"] = json.RawMessage(kw)
	}
	for k, v := range in {
		if gymFields[k] {
			out[k] = v
		}
	}
	out["logprobs"], out["top_logprobs"] = json.RawMessage("true"), json.RawMessage("0")
	return json.Marshal(out)
}

func (m *ModelServer) checkSampling(req *chatRequest) (int, string) {
	switch {
	case req.N != nil && *req.N != 1:
		return http.StatusInternalServerError, fmt.Sprintf("n is %d; only 1 is supported", *req.N)
	case req.TopK != nil && *req.TopK != -1:
		return http.StatusInternalServerError, fmt.Sprintf("AssertionError: top_k is %d, want unset or -1", *req.TopK)
	case req.TopP == nil:
		return http.StatusInternalServerError, "AssertionError: top_p is required"
	case req.Temperature == nil:
		return http.StatusInternalServerError, "AssertionError: temperature is required"
	case req.Logprobs && req.TopLogprobs == nil:
		return http.StatusBadRequest, "top_logprobs must be set when logprobs is true"
	case req.MaxTokens == nil || *req.MaxTokens < 1:
		return http.StatusBadRequest, "max_tokens must be a positive integer"
	}
	train := *req.Temperature == m.cfg.Temperature && *req.TopP == m.cfg.TopP
	val := (m.cfg.ValTemperature != 0 || m.cfg.ValTopP != 0) && *req.Temperature == m.cfg.ValTemperature && *req.TopP == m.cfg.ValTopP
	if !train && !val {
		return http.StatusInternalServerError, fmt.Sprintf("AssertionError: (temperature, top_p) = (%v, %v), want the trainer's (%v, %v)",
			*req.Temperature, *req.TopP, m.cfg.Temperature, m.cfg.TopP)
	}
	return 0, ""
}

// readMessages decodes the messages, checks their token fields and returns the
// prefix from the last message that has them (nil when none does).
func (m *ModelServer) readMessages(raw []json.RawMessage) ([]chat.Message, []int32, int, string) {
	msgs := make([]chat.Message, len(raw))
	var prefix []int32
	for i, r := range raw {
		var b bundle
		if err := json.Unmarshal(r, &msgs[i]); err != nil {
			return nil, nil, http.StatusUnprocessableEntity, fmt.Sprintf("messages[%d]: %v", i, err)
		}
		if err := json.Unmarshal(r, &b); err != nil {
			return nil, nil, http.StatusUnprocessableEntity, fmt.Sprintf("messages[%d] token fields: %v", i, err)
		}
		switch b.count() {
		case 0:
			continue
		case 3:
		default:
			return nil, nil, http.StatusUnprocessableEntity, fmt.Sprintf(
				"messages[%d]: prompt_token_ids, generation_token_ids and generation_log_probs must come together", i)
		}
		if len(*b.Gen) != len(*b.Logprobs) {
			return nil, nil, http.StatusUnprocessableEntity, fmt.Sprintf("messages[%d]: %d logprobs for %d generated ids", i, len(*b.Logprobs), len(*b.Gen))
		}
		m.mu.Lock()
		ok := m.emitted[bundleKey(*b.Prompt, *b.Gen, *b.Logprobs)]
		m.mu.Unlock()
		if !ok {
			return nil, nil, http.StatusBadRequest, fmt.Sprintf("messages[%d]: replayed token fields differ from every answer this server gave", i)
		}
		prefix = append(slices.Clone(*b.Prompt), *b.Gen...)
	}
	return msgs, prefix, 0, ""
}

// splice builds the engine prompt as NeMo RL's replace_prefix_tokens does.
func (m *ModelServer) splice(ctx context.Context, req *chatRequest, msgs []chat.Message, prefix []int32) ([]int32, int, string) {
	render := func(ms []chat.Message, gen bool) ([]int32, error) {
		r, err := m.cfg.Backend.Render(ctx, rollout.RenderRequest{Messages: ms, Tools: req.Tools, AddGenerationPrompt: gen, ChatTemplateKwargs: req.ChatTemplateKwargs})
		return r.Tokens, err
	}
	full, err := render(msgs, true)
	if err != nil {
		return nil, http.StatusInternalServerError, "rendering the chat template: " + err.Error()
	}
	if prefix == nil {
		return full, 0, ""
	}
	last := -1
	for i, msg := range msgs {
		if msg.Role == chat.RoleAssistant {
			last = i
		}
	}
	if last < 0 {
		return nil, http.StatusInternalServerError, "AssertionError: token fields but no assistant message"
	}
	head, err := render(msgs[:last+1], false)
	if err != nil {
		return nil, http.StatusInternalServerError, "rendering the chat template: " + err.Error()
	}
	cut := len(prefix)
	if prefix[cut-1] == m.cfg.EOS {
		cut--
	}
	n := 0
	for _, id := range head {
		if id == m.cfg.EOS {
			n++
		}
	}
	j, seen := -1, 0
	for i, id := range full {
		if id == m.cfg.EOS {
			if seen++; seen == n {
				j = i
				break
			}
		}
	}
	if n == 0 || j < 0 {
		return nil, http.StatusInternalServerError, fmt.Sprintf("AssertionError: EOS number %d not found in the rendered conversation", n)
	}
	return append(prefix[:cut:cut], full[j:]...), 0, ""
}

func (m *ModelServer) generate(w http.ResponseWriter, ctx context.Context, call int, req *chatRequest, prompt []int32) {
	maxLen := m.cfg.MaxModelLen
	if maxLen == 0 {
		if r, err := m.cfg.Backend.Render(ctx, rollout.RenderRequest{Messages: []chat.Message{{Role: chat.RoleUser, Content: "x"}}}); err == nil {
			maxLen = r.MaxModelLen
		}
	}
	maxTokens := *req.MaxTokens
	if maxLen > 0 {
		if len(prompt) >= maxLen {
			// The trainer's server answers 400 "maximum context length"; Gym's model
			// server turns that into an empty completion without token fields.
			writeJSON(w, http.StatusOK, map[string]any{
				"id": fmt.Sprintf("chatcmpl-%d", call), "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "finish_reason": "length", "message": map[string]any{"role": "assistant", "content": nil}}},
			})
			return
		}
		maxTokens = min(maxTokens, maxLen-len(prompt))
	}
	g, err := m.cfg.Backend.Generate(ctx, rollout.GenerateRequest{Prompt: prompt, MaxTokens: maxTokens, Seed: req.Seed, Sampling: sampling.Params{
		Temperature: *req.Temperature, TopP: *req.TopP, TopK: -1, MinP: req.MinP,
		RepetitionPenalty: req.RepetitionPenalty, PresencePenalty: req.PresencePenalty, FrequencyPenalty: req.FrequencyPenalty,
	}})
	if err != nil {
		if ctx.Err() == nil {
			writeDetail(w, http.StatusInternalServerError, "generation: "+err.Error())
		}
		return
	}
	text := g.Text
	a := Answer{Content: &text, PromptTokenIDs: prompt, GenerationTokenIDs: g.Tokens, FinishReason: g.FinishReason,
		GenerationLogProbs: make([]float64, len(g.Logprobs))}
	for i, lp := range g.Logprobs {
		a.GenerationLogProbs[i] = math.Max(float64(lp), -9999)
	}
	if m.cfg.Answer != nil {
		m.cfg.Answer(call, &a)
	}
	if a.PromptTokenIDs != nil && a.GenerationTokenIDs != nil && a.GenerationLogProbs != nil {
		lps := make([]float32, len(a.GenerationLogProbs))
		for i, lp := range a.GenerationLogProbs {
			lps[i] = float32(lp)
		}
		m.mu.Lock()
		m.emitted[bundleKey(a.PromptTokenIDs, a.GenerationTokenIDs, lps)] = true
		m.mu.Unlock()
	}
	msg := map[string]any{"role": "assistant", "content": a.Content}
	if a.PromptTokenIDs != nil {
		msg["prompt_token_ids"] = a.PromptTokenIDs
	}
	if a.GenerationTokenIDs != nil {
		msg["generation_token_ids"] = a.GenerationTokenIDs
	}
	if a.GenerationLogProbs != nil {
		msg["generation_log_probs"] = a.GenerationLogProbs
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", call), "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": a.FinishReason, "message": msg}},
		"usage":   map[string]int{"prompt_tokens": len(prompt), "completion_tokens": len(g.Tokens), "total_tokens": len(prompt) + len(g.Tokens)},
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`"encoding the answer failed"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeDetail(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusUnprocessableEntity {
		writeJSON(w, status, map[string]any{"detail": []any{map[string]string{"msg": msg}}})
		return
	}
	writeJSON(w, status, msg)
}

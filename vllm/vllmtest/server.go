package vllmtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/internal/fakehttp"
)

// DefaultModel is the served model name unless [WithModel] says otherwise.
const DefaultModel = "vllmtest-sim"

// Defaults of the simulated server flags.
const (
	DefaultMaxModelLen = 32768    // context length in tokens ([WithMaxModelLen])
	DefaultMaxLogprobs = 20       // cap on logprobs and prompt_logprobs ([WithMaxLogprobs])
	DefaultVersion     = "0.11.0" // vLLM version reported by /version ([WithVersion])
)

// Option configures a [Server].
type Option func(*config)

type config struct {
	model       string
	maxModelLen int
	maxLogprobs int
	version     string
	seed        uint64
	thinking    bool
	thinkOnly   bool // WithThinkingOnlyTemplate
	flatErrors  bool
	agentScript func(ScriptInput) (string, bool)
	chatScript  func(ChatScriptInput) []string
	genConfig   map[string]any
	reasoning   bool
	frozen      *frozenTeacher // WithFrozenTeacher; nil for none
}

// WithModel sets the served model name reported by /v1/models and checked against the
// "model" field of requests.
func WithModel(name string) Option { return func(c *config) { c.model = name } }

// WithMaxModelLen sets the context length (vLLM's --max-model-len).
func WithMaxModelLen(n int) Option { return func(c *config) { c.maxModelLen = n } }

// WithMaxLogprobs sets vLLM's --max-logprobs cap on logprobs and prompt_logprobs
// (default 20); -1 means no cap.
func WithMaxLogprobs(n int) Option { return func(c *config) { c.maxLogprobs = n } }

// WithVersion sets the version string returned by /version.
func WithVersion(v string) Option { return func(c *config) { c.version = v } }

// WithModelSeed selects a different simulated model: two servers with different seeds
// give different distributions over the same vocabulary (a student and a teacher, say).
func WithModelSeed(seed uint64) Option { return func(c *config) { c.seed = seed } }

// WithThinkingTemplate renders assistant turns the way the Qwen3 hybrid-thinking
// template does: reasoning ("<think>…</think>" at the start of content, or
// reasoning_content) is kept only for assistant turns after the last user query, so a
// re-render of a conversation that gained a user message drops earlier reasoning.
func WithThinkingTemplate() Option { return func(c *config) { c.thinking = true } }

// WithFlatErrors makes error bodies use the flat vLLM 0.8–0.10.0 shape
// {"object":"error",…} instead of the nested {"error":{…}} shape of 0.10.1 and later.
func WithFlatErrors() Option { return func(c *config) { c.flatErrors = true } }

// WithAgentScript decides what assistant turns generate on /v1/completions. For each
// choice of a prompt that ends with the assistant generation prompt, script is called
// with the conversation parsed back from the prompt; when it returns ok, the server
// tokenizes the returned text, appends <|im_end|> (unless the text already ends with a
// stop token), ends it at its first stop token (or stop_token_ids member), cuts it at
// max_tokens (finish_reason "length"), and reports the model's own logprobs for those
// ids. When it returns false, the choice is sampled from the
// model. script is called concurrently from request goroutines and must be safe for
// concurrent use.
func WithAgentScript(script func(ScriptInput) (text string, ok bool)) Option {
	return func(c *config) { c.agentScript = script }
}

// WithChatScript decides what /v1/chat/completions answers. script returns one text per
// choice (choice j uses texts[j % len(texts)]); an empty result means "sample from the
// model". Texts holding <tool_call> blocks come back as message.tool_calls. script is
// called concurrently and must be safe for concurrent use.
func WithChatScript(script func(ChatScriptInput) []string) Option {
	return func(c *config) { c.chatScript = script }
}

// Server is a running simulated vLLM server on a loopback port. It is safe for
// concurrent use. Close it when done ([NewServer] does that through t.Cleanup).
type Server struct {
	// URL is the base URL, http://127.0.0.1:PORT, without a trailing slash.
	URL string

	cfg config
	gen genDefaults
	tok *tokenizer
	lm  *model
	// shifted is the model after a frozen teacher's trigger ([WithFrozenTeacher]);
	// nil for none.
	shifted *model
	ln      net.Listener
	srv     *http.Server
	done    chan struct{}
	close   sync.Once

	ids    atomic.Uint64
	conns  atomic.Int64 // connections accepted
	routes map[string]route
	// bufs holds the buffers of finished responses (*[]byte) for the next ones.
	bufs sync.Pool
	// calls remembers the tool calls of the assistant turns the agent script reads.
	calls callCache

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	log      fakehttp.Log[Request]
	faults   fakehttp.Faults
}

// NewServer starts a server for a test and closes it when the test ends. It fails the
// test if the server cannot start.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Start(opts...)
	if err != nil {
		t.Fatalf("vllmtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts a server for a program (the quickstart, say). The caller must Close it.
func Start(opts ...Option) (*Server, error) {
	cfg := config{
		model:       DefaultModel,
		maxModelLen: DefaultMaxModelLen,
		maxLogprobs: DefaultMaxLogprobs,
		version:     DefaultVersion,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.model == "" {
		return nil, errors.New("model name is empty")
	}
	if cfg.maxModelLen < 1 {
		return nil, fmt.Errorf("max model len %d is below 1", cfg.maxModelLen)
	}
	if cfg.maxLogprobs < -1 {
		return nil, fmt.Errorf("max logprobs %d is invalid (want -1 or ≥ 0)", cfg.maxLogprobs)
	}
	gen, err := parseGenerationConfig(cfg.genConfig)
	if err != nil {
		return nil, err
	}
	if err := cfg.frozen.check(cfg.seed); err != nil {
		return nil, err
	}
	tok := defaultTokenizer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{
		URL:  "http://" + ln.Addr().String(),
		cfg:  cfg,
		gen:  gen,
		tok:  tok,
		lm:   sharedModel(tok, cfg.seed),
		ln:   ln,
		done: make(chan struct{}),
	}
	if cfg.frozen != nil {
		s.shifted = sharedModel(tok, cfg.frozen.seed)
	}
	s.buildRoutes()
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 10 * time.Second, ConnState: s.connState}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

var (
	modelsMu sync.Mutex
	models   = map[uint64]*model{}
)

// sharedModel builds each seed's model once per process.
func sharedModel(tok *tokenizer, seed uint64) *model {
	modelsMu.Lock()
	defer modelsMu.Unlock()
	m, ok := models[seed]
	if !ok {
		m = newModel(tok, seed)
		models[seed] = m
	}
	return m
}

// Close stops the server, closes every connection and waits for the handlers of
// requests in flight to return (so a script that never returns blocks Close). It is
// idempotent.
func (s *Server) Close() {
	s.close.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		_ = s.srv.Close()
		<-s.done
		s.inflight.Wait()
	})
}

// enter registers a handler; it is false once Close has begun.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

// Model returns the served model name.
func (s *Server) Model() string { return s.cfg.model }

// MaxModelLen returns the simulated --max-model-len.
func (s *Server) MaxModelLen() int { return s.cfg.maxModelLen }

// VocabSize returns the number of token ids.
func (s *Server) VocabSize() int { return s.tok.vocabSize() }

// Tokenize returns the ids of text as /tokenize would in prompt form (special-token
// literals become special ids; no BOS is ever added).
func (s *Server) Tokenize(text string) []int32 { return s.tok.encode(text) }

// Decode returns the text of ids with special tokens kept. Ids outside the vocabulary
// are skipped.
func (s *Server) Decode(ids []int32) string {
	var ok []int32
	for _, id := range ids {
		if id >= 0 && int(id) < s.tok.vocabSize() {
			ok = append(ok, id)
		}
	}
	text, _ := s.tok.decode(ok, false)
	return text
}

// Render returns the ids of msgs rendered with the server's chat template, exactly as
// /tokenize in chat form answers for the same messages, tools, add_generation_prompt
// and chat_template_kwargs. Errors are those /tokenize answers with 400.
func (s *Server) Render(msgs []chat.Message, tools []chat.Tool, addGenerationPrompt bool, kwargs map[string]any) ([]int32, error) {
	wire := make([]wireMessage, len(msgs))
	for i, m := range msgs {
		w := wireMessage{Role: m.Role, Content: wireContent(m.Content), ToolCallID: m.ToolCallID, Name: m.Name}
		if m.ReasoningContent != "" {
			r := m.ReasoningContent
			w.ReasoningContent = &r
		}
		for _, tc := range m.ToolCalls {
			var wt wireToolCall
			wt.ID, wt.Type, wt.Function.Name = tc.ID, tc.Type, tc.Function.Name
			args, err := json.Marshal(tc.Function.Arguments)
			if err != nil {
				return nil, err
			}
			wt.Function.Arguments = args
			w.ToolCalls = append(w.ToolCalls, wt)
		}
		wire[i] = w
	}
	var rawTools []json.RawMessage
	for _, t := range tools {
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		rawTools = append(rawTools, b)
	}
	text, e := s.renderRequest(wire, rawTools, &addGenerationPrompt, false, kwargs)
	if e != nil {
		return nil, e
	}
	return s.tok.encode(text), nil
}

package nemogym

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/internal/jsonscan"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/vllm"
)

// Sampling is what the row's responses_create_params say about sampling; NeMo RL
// stamps its training values into every row and asserts them on every model call.
type Sampling struct {
	Temperature     *float64 // nil: the agent's own
	TopP            *float64 // nil: the agent's own
	MaxOutputTokens int      // 0: the agent's own bound per call
}

// Session is one rollout's state on the model-server path: the row's sampling and
// the token fields of every model call so far, replayed unchanged on later calls. The
// agent server makes one per POST /run and hands it to the [Runner] in the context;
// a [Policy] finds it there. It is safe for concurrent use.
type Session struct {
	sampling Sampling
	mu       sync.Mutex
	calls    []TokenInfo
	frags    []tokenFields // each call's token fields, written once
	ids      [][]byte      // the ids of the last call's prompt and generation, as list elements in pieces (see policybody.go)
	enc      msgCache      // the bodies' start, up to the messages written so far
	jar      http.CookieJar

	template    bool // SetTemplate was called
	tools       []chat.Tool
	templateKws map[string]any

	overflow bool // a call met a context overflow

	rolloutID string // the row's rollout id, "" for none
}

// ContextOverflow reports whether a model call of the rollout met a context overflow
// ([ErrContextOverflow]). The agent server reads it when a rollout fails, since a
// Runner may report the policy's error as text only (Env.RunOne does).
func (s *Session) ContextOverflow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overflow
}

// SetTemplate tells the Policy the tools and chat-template kwargs the agent of this
// rollout renders with; they are sent with every call instead of PolicyConfig's, so
// that the model server renders what the agent did. [Runner]s call it
// (Env.RunOne does).
func (s *Session) SetTemplate(tools []chat.Tool, kwargs map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.template, s.tools, s.templateKws = true, tools, kwargs
}

// NewSession returns a Session with the row's sampling.
func NewSession(s Sampling) *Session { return &Session{sampling: s, jar: newJar()} }

type sessionKey struct{}

// WithSession returns ctx carrying s.
func WithSession(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// SessionFrom returns the Session in ctx, or nil.
func SessionFrom(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}

// Calls returns copies of the token fields of the calls made so far.
func (s *Session) Calls() []TokenInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// ErrNoSession is returned by [Policy.Generate] when ctx carries no [Session].
var ErrNoSession = errors.New("nemogym: no Session in the context (run the rollout through the agent server, or use nemogym.WithSession)")

// ErrNonContiguous is wrapped by [Policy.Generate]'s error when the model server's
// prompt does not begin with every earlier prompt and generation of the rollout (NeMo
// RL's "Non-contiguous messages found!"), or does not equal the ids the agent holds.
// Such a call is never trained on: the rollout fails.
var ErrNonContiguous = errors.New("nemogym: the model server's prompt does not extend the rollout's tokens")

// ErrContextOverflow is wrapped by [Policy.Generate]'s error when the model server
// answers an empty completion without token fields and finish_reason "length": NeMo
// Gym's answer when the engine refused the prompt as longer than its context. The
// agent bounds each call by the context the tokenizer reports, so it means the
// trainer's engine has a shorter context than its /tokenize says. The agent server
// answers such a rollout as a data failure (see [Server]).
var ErrContextOverflow = errors.New("nemogym: the model server reports a context overflow (an empty completion without token fields)")

// APIError is a non-2xx answer of the model server.
type APIError struct {
	Status int
	Body   string
}

// Error says what the model server answered.
func (e *APIError) Error() string {
	return fmt.Sprintf("nemogym: model server answered %d: %s", e.Status, strings.TrimSpace(e.Body))
}

// PolicyConfig configures a [Policy].
type PolicyConfig struct {
	// ModelURL is the model server's base URL; chat completions go to
	// ModelURL + "/v1/chat/completions". Required.
	ModelURL string
	// Tokenizer renders chat templates (/tokenize in chat form): the trainer's
	// server, which serves /tokenize beside its chat endpoint. Required.
	Tokenizer *vllm.Client
	// Model is sent as "model"; the model server overwrites it with its own.
	Model string
	// Tools are the tool definitions the agent renders into its prompts, for
	// sessions whose Runner does not say ([Session.SetTemplate]; Env.RunOne does);
	// the model server renders the same. Nil means those of rollout.DefaultTools()
	// (the agent's default). Tools that are not the agent's make every call's prompt
	// differ from the agent's ids, which fails the rollout.
	Tools []chat.Tool
	// ChatTemplateKwargs are sent with every call, as Tools.
	ChatTemplateKwargs map[string]any
	// NoRolloutPrefix leaves NeMo Gym's /ng-rollout/<id>/ path prefix off the model
	// calls of rollouts whose row gives an id: set it when ModelURL is not a NeMo Gym
	// model server (which strips the prefix, and with its opt-in capture attributes
	// the call to the rollout), such as a trainer's server called directly.
	NoRolloutPrefix bool
	// HTTPClient sends the model calls; nil means a client of its own without
	// timeouts (a call lasts as long as generation does; ctx bounds it), keeping up
	// to 256 idle connections for 4 s.
	HTTPClient *http.Client
}

// Policy is a [rollout.Policy] that generates through a NeMo Gym model server (or the
// trainer's OpenAI-compatible server behind it) with token information on: each call
// sends the conversation as chat messages, every earlier assistant turn carrying its
// prompt_token_ids, generation_token_ids and generation_log_probs exactly as the
// server returned them, so that the trainer's server splices the prompt to extend
// every earlier prompt and generation. Rendering (the agent's token deltas) goes to
// the trainer's /tokenize.
//
// Every call states every sampling field (the row's temperature and top_p, the
// agent's others, top_k −1 when off), logprobs true, top_logprobs 0, one choice. The
// answer must carry all three token fields, as many logprobs as generated ids, no
// NaN, and a prompt that extends the rollout's earlier calls and equals the ids the
// agent holds; anything else is an error (wrapping [ErrNonContiguous] for the
// prompt), counted in [Policy.NonContiguous]. The server's tool-call parser and
// reasoning parser, when on, are undone: the text the agent parses is the content
// with the reasoning in <think> tags before it and each tool call as a Hermes
// <tool_call> block after it.
//
// When the rollout's row gives an id ([Row.RolloutID]), every model call goes to
// ModelURL + "/ng-rollout/<id>/v1/chat/completions", the per-rollout path prefix
// that NeMo Gym's model server strips and its opt-in capture (eval model-call
// capture, training-token capture) attributes calls by; without an id, or with
// PolicyConfig.NoRolloutPrefix, to ModelURL + "/v1/chat/completions".
//
// Generate needs the rollout's [Session] in ctx. A Policy is safe for concurrent use.
type Policy struct {
	cfg           PolicyConfig
	nonContiguous atomic.Int64
}

// NewPolicy returns a Policy. It does no I/O.
func NewPolicy(cfg PolicyConfig) (*Policy, error) {
	if cfg.ModelURL == "" {
		return nil, errors.New("nemogym: NewPolicy: ModelURL is required")
	}
	if cfg.Tokenizer == nil {
		return nil, errors.New("nemogym: NewPolicy: Tokenizer is required (the trainer's server, which serves /tokenize)")
	}
	cfg.ModelURL = strings.TrimSuffix(cfg.ModelURL, "/")
	if cfg.HTTPClient == nil {
		// Many rollouts call at once; idle connections are dropped before a Python
		// server's keep-alive (uvicorn: 5 s by default, Gym's servers 30 s) would.
		cfg.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 256, IdleConnTimeout: 4 * time.Second,
		}}
	}
	if cfg.Tools == nil {
		for _, t := range rollout.DefaultTools() {
			cfg.Tools = append(cfg.Tools, t.Definition())
		}
	}
	return &Policy{cfg: cfg}, nil
}

// CloseIdleConnections closes the idle connections of the Policy's HTTP client to
// the model server, for a clean shutdown.
func (p *Policy) CloseIdleConnections() {
	p.cfg.HTTPClient.CloseIdleConnections()
}

// NonContiguous returns the number of calls whose prompt broke the contiguity rule.
func (p *Policy) NonContiguous() int64 { return p.nonContiguous.Load() }

// Render implements [rollout.Policy] with the tokenizer's /tokenize.
func (p *Policy) Render(ctx context.Context, req rollout.RenderRequest) (rollout.Rendered, error) {
	return p.cfg.Tokenizer.Render(ctx, req)
}

type chatAnswer struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			PromptTokenIDs     *[]int32   `json:"prompt_token_ids"`
			GenerationTokenIDs *[]int32   `json:"generation_token_ids"`
			GenerationLogProbs *[]float64 `json:"generation_log_probs"`
		} `json:"message"`
	} `json:"choices"`
}

// Generate implements [rollout.Policy]: one POST /v1/chat/completions.
func (p *Policy) Generate(ctx context.Context, req rollout.GenerateRequest) (rollout.Generation, error) {
	const op = "nemogym: POST /v1/chat/completions"
	s := SessionFrom(ctx)
	if s == nil {
		return rollout.Generation{}, ErrNoSession
	}
	if len(req.Messages) == 0 {
		return rollout.Generation{}, fmt.Errorf("%s: the request carries no messages (GenerateRequest.Messages)", op)
	}
	s.mu.Lock()
	calls := slices.Clone(s.calls)
	tools, kwargs := p.cfg.Tools, p.cfg.ChatTemplateKwargs
	if s.template {
		tools, kwargs = s.tools, s.templateKws
	}
	msgs, err := s.enc.messages(req.Messages, s.frags)
	s.mu.Unlock()
	if err != nil {
		return rollout.Generation{}, fmt.Errorf("%s: %w", op, err)
	}
	body, err := p.body(req, s.sampling, msgs, tools, kwargs)
	if err != nil {
		return rollout.Generation{}, fmt.Errorf("%s: %w", op, err)
	}
	raw, err := p.post(ctx, s, body)
	if err != nil {
		return rollout.Generation{}, err
	}
	var ans chatAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return rollout.Generation{}, fmt.Errorf("%s: decoding the answer: %w", op, err)
	}
	if len(ans.Choices) != 1 {
		return rollout.Generation{}, fmt.Errorf("%s: %d choices, want 1", op, len(ans.Choices))
	}
	ch := ans.Choices[0]
	m := ch.Message
	if m.PromptTokenIDs == nil && m.GenerationTokenIDs == nil && m.GenerationLogProbs == nil &&
		ch.FinishReason == rollout.FinishLength && (m.Content == nil || *m.Content == "") {
		s.mu.Lock()
		s.overflow = true
		s.mu.Unlock()
		return rollout.Generation{}, fmt.Errorf("%s: %w: the engine refused the %d-token prompt as longer than its context, "+
			"which is shorter than the one its /tokenize reports (give the engine a max_model_len no shorter than that)",
			op, ErrContextOverflow, len(req.Prompt))
	}
	if m.PromptTokenIDs == nil || m.GenerationTokenIDs == nil || m.GenerationLogProbs == nil {
		return rollout.Generation{}, fmt.Errorf("%s: the answer lacks token information (prompt_token_ids, generation_token_ids, generation_log_probs come together or not at all; run the model server with return_token_id_information: true)", op)
	}
	info := TokenInfo{PromptTokenIDs: *m.PromptTokenIDs, GenerationTokenIDs: *m.GenerationTokenIDs}
	if len(*m.GenerationLogProbs) != len(info.GenerationTokenIDs) {
		return rollout.Generation{}, fmt.Errorf("%s: %d logprobs for %d generated ids", op, len(*m.GenerationLogProbs), len(info.GenerationTokenIDs))
	}
	info.GenerationLogProbs = make([]float32, len(info.GenerationTokenIDs))
	for i, lp := range *m.GenerationLogProbs {
		if math.IsNaN(lp) {
			return rollout.Generation{}, fmt.Errorf("%s: generation logprob %d is NaN", op, i)
		}
		info.GenerationLogProbs[i] = float32(max(lp, LogprobFloor))
	}
	if err := p.contiguous(calls, info.PromptTokenIDs, req.Prompt); err != nil {
		return rollout.Generation{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := s.record(info, len(calls)); err != nil {
		return rollout.Generation{}, fmt.Errorf("%s: %w", op, err)
	}
	finish := ch.FinishReason
	if finish == "tool_calls" {
		finish = rollout.FinishStop
	}
	return rollout.Generation{
		Tokens:       info.GenerationTokenIDs,
		Logprobs:     info.GenerationLogProbs,
		Text:         hermesText(m.Content, firstOf(m.ReasoningContent, m.Reasoning), m.ToolCalls),
		FinishReason: finish,
		PromptTokens: info.PromptTokenIDs,
	}, nil
}

// record keeps a call's token fields, whose prompt begins with the prompt and
// generation of the rollout's call number after (when after is not 0), to replay
// them on later calls.
func (s *Session) record(info TokenInfo, after int) error {
	lps, err := logprobMembers(info.GenerationLogProbs)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var list [][]byte
	held := 0
	if n := len(s.calls); n > 0 && n == after {
		// s.ids holds the ids of that call's prompt and generation; after a call
		// recorded meanwhile, a new list
		list, held = s.ids, len(s.calls[n-1].PromptTokenIDs)+len(s.calls[n-1].GenerationTokenIDs)
	}
	f := tokenFields{lps: lps}
	s.ids, f.prompt, f.gen = appendIDPieces(list, held, info)
	s.calls = append(s.calls, info)
	s.frags = append(s.frags, f)
	return nil
}

// contiguous checks the server's prompt against the rollout's earlier calls and the
// agent's ids.
func (p *Policy) contiguous(calls []TokenInfo, prompt, sent []int32) error {
	if n := len(calls); n > 0 {
		prev := calls[n-1]
		seen := len(prev.PromptTokenIDs) + len(prev.GenerationTokenIDs)
		if len(prompt) < seen || !slices.Equal(prompt[:len(prev.PromptTokenIDs)], prev.PromptTokenIDs) ||
			!slices.Equal(prompt[len(prev.PromptTokenIDs):seen], prev.GenerationTokenIDs) {
			p.nonContiguous.Add(1)
			return fmt.Errorf("%w: call %d's %d-token prompt does not begin with the %d tokens of call %d's prompt and generation",
				ErrNonContiguous, n+1, len(prompt), seen, n)
		}
	}
	if !slices.Equal(prompt, sent) {
		p.nonContiguous.Add(1)
		return fmt.Errorf("%w: the server's %d-token prompt differs from the agent's %d tokens at position %d",
			ErrNonContiguous, len(prompt), len(sent), diffAt(prompt, sent))
	}
	return nil
}

func diffAt(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// body returns a call's request body: {"messages":[msgs],…} with the other keys
// after the messages (msgs is what msgCache.messages returns), in the order and
// form encoding/json writes a map of them: keys sorted, HTML characters escaped.
//
// Every sampling field is stated. Temperature, top_p and the penalties are fields
// NeMo Gym's chat parameters declare; the engine's own fields (top_k, min_p,
// repetition_penalty) travel twice: in metadata.extra_body (a JSON string), which NeMo
// Gym's model server merges under the request (it drops top-level keys it does not
// declare), and at the top level, which the trainer's server reads when called
// directly.
func (p *Policy) body(req rollout.GenerateRequest, s Sampling, msgs [][]byte, tools []chat.Tool, kwargs map[string]any) (requestBody, error) {
	sp := req.Sampling.Resolved()
	if s.Temperature != nil {
		sp.Temperature = *s.Temperature
	}
	if s.TopP != nil {
		sp.TopP = *s.TopP
	}
	for _, v := range [...]float64{sp.Temperature, sp.TopP, sp.MinP, sp.RepetitionPenalty, sp.PresencePenalty, sp.FrequencyPenalty} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return requestBody{}, fmt.Errorf("sampling %+v holds %v, which JSON cannot carry", sp, v)
		}
	}
	maxTokens := req.MaxTokens
	if s.MaxOutputTokens > 0 {
		maxTokens = min(maxTokens, s.MaxOutputTokens)
	}
	var toolsJSON, kw []byte
	if len(tools) > 0 {
		var err error
		if toolsJSON, err = json.Marshal(tools); err != nil {
			return requestBody{}, fmt.Errorf("tools: %w", err)
		}
	}
	if kwargs != nil {
		var err error
		if kw, err = json.Marshal(kwargs); err != nil {
			return requestBody{}, fmt.Errorf("ChatTemplateKwargs: %w", err)
		}
	}
	b := make([]byte, 0, 512+len(p.cfg.Model)+len(toolsJSON)+3*len(kw))
	b = append(b, "],"...)
	if kw != nil {
		b = append(append(append(b, `"chat_template_kwargs":`...), kw...), ',')
	}
	b = jsonscan.AppendFloat64(append(b, `"frequency_penalty":`...), sp.FrequencyPenalty)
	b = append(b, `,"include_stop_str_in_output":true,"logprobs":true,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	b = append(b, `,"metadata":{`...)
	if kw != nil {
		b = append(appendString(append(b, `"chat_template_kwargs":`...), string(kw)), ',')
	}
	b = append(b, `"extra_body":"{\"include_stop_str_in_output\":true,\"min_p\":`...)
	b = jsonscan.AppendFloat64(b, sp.MinP)
	b = jsonscan.AppendFloat64(append(b, `,\"repetition_penalty\":`...), sp.RepetitionPenalty)
	b = append(b, `,\"skip_special_tokens\":false,\"top_k\":`...)
	b = strconv.AppendInt(b, int64(sp.TopK), 10)
	b = jsonscan.AppendFloat64(append(b, `}"},"min_p":`...), sp.MinP)
	b = appendString(append(b, `,"model":`...), p.cfg.Model)
	b = jsonscan.AppendFloat64(append(b, `,"presence_penalty":`...), sp.PresencePenalty)
	b = jsonscan.AppendFloat64(append(b, `,"repetition_penalty":`...), sp.RepetitionPenalty)
	if req.Seed != nil {
		b = strconv.AppendInt(append(b, `,"seed":`...), *req.Seed, 10)
	}
	b = jsonscan.AppendFloat64(append(b, `,"skip_special_tokens":false,"temperature":`...), sp.Temperature)
	if toolsJSON != nil {
		b = append(append(b, `,"tools":`...), toolsJSON...)
	}
	b = strconv.AppendInt(append(b, `,"top_k":`...), int64(sp.TopK), 10)
	b = jsonscan.AppendFloat64(append(b, `,"top_logprobs":0,"top_p":`...), sp.TopP)
	return requestBody{head: msgs, tail: append(b, '}')}, nil
}

func (p *Policy) post(ctx context.Context, s *Session, body requestBody) ([]byte, error) {
	const op = "nemogym: POST /v1/chat/completions"
	url := p.cfg.ModelURL + "/v1/chat/completions"
	if s.rolloutID != "" && !p.cfg.NoRolloutPrefix {
		url = p.cfg.ModelURL + "/ng-rollout/" + s.rolloutID + "/v1/chat/completions"
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body.reader())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	// as for a body in one slice: a Content-Length, and the body again for a retry
	hr.ContentLength = int64(body.Len())
	hr.GetBody = func() (io.ReadCloser, error) { return body.reader(), nil }
	hr.Header.Set("Content-Type", "application/json")
	for _, c := range s.jar.Cookies(hr.URL) {
		hr.AddCookie(c)
	}
	resp, err := p.cfg.HTTPClient.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	s.jar.SetCookies(hr.URL, resp.Cookies())
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", op, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s: %w", op, &APIError{Status: resp.StatusCode, Body: string(raw)})
	}
	return raw, nil
}

func firstOf(a, b *string) string {
	if a != nil && *a != "" {
		return *a
	}
	if b != nil {
		return *b
	}
	return ""
}

// hermesText rebuilds the text the agent's parser reads from a parsed answer.
func hermesText(content *string, reasoning string, calls []struct {
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}) string {
	var b strings.Builder
	if reasoning != "" {
		b.WriteString("<think>" + reasoning + "</think>")
	}
	if content != nil {
		b.WriteString(*content)
	}
	for _, c := range calls {
		args := json.RawMessage(c.Function.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(c.Function.Arguments)
		}
		call, _ := json.Marshal(struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}{c.Function.Name, args})
		b.WriteString("\n<tool_call>\n" + string(call) + "\n</tool_call>")
	}
	return b.String()
}

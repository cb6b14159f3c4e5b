package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/sampling"
)

// Config configures an [Agent]. The zero value of every field is a documented default.
type Config struct {
	// MaxTurns bounds the policy calls of one rollout. 0 means 15.
	MaxTurns int
	// MaxTokens bounds each turn's generation. 0 means 2048. It is lowered to what is
	// left of the model's context when the server reports its length.
	MaxTokens int
	// Sampling is sent with every generation. Its zero Temperature means 1.0 (set
	// Greedy for greedy decoding); its other zero values are off (see package sampling).
	Sampling sampling.Params
	// Greedy samples with temperature 0.
	Greedy bool
	// Tools are the tools offered to the model. Nil means DefaultTools(); an empty
	// non-nil slice offers none. Names must be unique.
	Tools []Tool
	// ToolCallParser reads tool calls from generated text. Nil means Hermes{}.
	ToolCallParser ToolCallParser
	// ChatTemplateKwargs are sent with every render (for example
	// {"enable_thinking": false}).
	ChatTemplateKwargs map[string]any
	// ExtraCloses are end-of-turn ids besides the template's close; see
	// TemplateConfig.ExtraCloses.
	ExtraCloses []int32
	// MinGenerateTokens is the least generation budget a turn needs: when the held
	// prompt plus this does not fit the model's context, the episode stops with
	// StopContextLength. 0 means 64.
	MinGenerateTokens int
	// MaxResultChars caps every tool message, head and tail kept and the cut marked.
	// The built-in tools cap their large fields well below this; a result still
	// longer (JSON escaping can multiply the length of control characters six-fold)
	// that is a JSON object stays a valid JSON object: its longest string values are
	// cut instead. 0 means 16000.
	MaxResultChars int
	// ContinueTruncated keeps the episode going after a turn cut at MaxTokens: the
	// template's close is appended as SegCloseSynth, then the separator; complete tool
	// calls before the cut are run and an unclosed one gets an error result. By
	// default a truncated turn ends the episode with StopTruncated.
	ContinueTruncated bool
	// Logger receives debug records per turn and warnings on drift; nil logs nothing.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxTurns <= 0 {
		c.MaxTurns = 15
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = 2048
	}
	if c.Sampling.Temperature <= 0 {
		c.Sampling.Temperature = 1.0
	}
	if c.Greedy {
		c.Sampling.Temperature = 0
	}
	if c.Tools == nil {
		c.Tools = DefaultTools()
	}
	if c.ToolCallParser == nil {
		c.ToolCallParser = Hermes{}
	}
	if c.MinGenerateTokens <= 0 {
		c.MinGenerateTokens = 64
	}
	if c.MaxResultChars <= 0 {
		c.MaxResultChars = 16000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Agent runs the multi-turn tool loop against a Policy and records a token-exact
// [Trajectory]. One Agent serves any number of concurrent rollouts; it is safe for
// concurrent use.
type Agent struct {
	policy Policy
	cfg    Config
	tmpl   *Template
	tools  map[string]Tool
	names  []string

	mu    sync.Mutex
	total Stats
}

// NewAgent returns an Agent for policy p. It does no I/O: the template is calibrated
// on the first Run.
func NewAgent(p Policy, cfg Config) (*Agent, error) {
	if p == nil {
		return nil, errors.New("rollout: NewAgent: nil Policy")
	}
	cfg = cfg.withDefaults()
	a := &Agent{policy: p, cfg: cfg, tools: make(map[string]Tool, len(cfg.Tools))}
	defs := make([]chat.Tool, 0, len(cfg.Tools))
	for _, t := range cfg.Tools {
		if t == nil {
			return nil, errors.New("rollout: NewAgent: nil Tool")
		}
		d := t.Definition()
		name := d.Function.Name
		if name == "" {
			return nil, errors.New("rollout: NewAgent: a tool has no name")
		}
		if _, dup := a.tools[name]; dup {
			return nil, fmt.Errorf("rollout: NewAgent: two tools named %q", name)
		}
		a.tools[name] = t
		a.names = append(a.names, name)
		defs = append(defs, d)
	}
	tmpl, err := NewTemplate(p, TemplateConfig{
		Tools:              defs,
		ChatTemplateKwargs: cfg.ChatTemplateKwargs,
		ExtraCloses:        cfg.ExtraCloses,
	})
	if err != nil {
		return nil, err
	}
	a.tmpl = tmpl
	return a, nil
}

// Template returns the agent's calibrated template (same policy, tools and kwargs), for
// computing further deltas such as hints over the agent's trajectories.
func (a *Agent) Template() *Template { return a.tmpl }

// ToolDefinitions returns the definitions of the offered tools, in order.
func (a *Agent) ToolDefinitions() []chat.Tool { return a.tmpl.Tools() }

// Stats returns the counters summed over every rollout this Agent has run.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.total
}

// Run runs one rollout: messages (typically system + user) are the conversation's start,
// sb the rollout's own sandbox (Run does not close it).
//
// How the episode ended is in Trajectory.Stop: a turn without tool calls, the turn
// budget, the context length, a truncated turn, a policy error, a prompt echo mismatch
// or template drift; for the last four and the context length, Trajectory.Err says
// more. None of these is a Go error. Run returns an
// error only for misuse (no messages, nil sandbox) or when ctx ends; in the latter case
// it also returns the trajectory so far, with Stop set to StopCanceled.
func (a *Agent) Run(ctx context.Context, messages []chat.Message, sb Sandbox) (*Trajectory, error) {
	t, _, err := a.RunStats(ctx, messages, sb)
	return t, err
}

// RunStats is Run that also returns the rollout's own boundary counters.
func (a *Agent) RunStats(ctx context.Context, messages []chat.Message, sb Sandbox) (*Trajectory, Stats, error) {
	if len(messages) == 0 {
		return nil, Stats{}, errors.New("rollout: Agent.Run: no messages")
	}
	if sb == nil {
		return nil, Stats{}, errors.New("rollout: Agent.Run: nil Sandbox")
	}
	if accountOf(ctx) == nil {
		ctx = WithToolBudget(ctx) // the file tools' host work counts against this rollout
	}
	r := &run{a: a, sb: sb, tr: &Trajectory{Messages: chat.Clone(messages)}, stats: Stats{Rollouts: 1}, seed: seedOf(ctx)}
	err := r.loop(ctx)
	r.finish()
	a.mu.Lock()
	a.total = a.total.Add(r.stats)
	a.mu.Unlock()
	if err != nil {
		return r.tr, r.stats, fmt.Errorf("rollout: Agent.Run: %w", err)
	}
	return r.tr, r.stats, nil
}

// run is the state of one rollout.
type run struct {
	a     *Agent
	sb    Sandbox
	tr    *Trajectory
	stats Stats
	cal   Calibration
	seed  *int64 // of every generation request; nil for none (WithSeed)
}

func (r *run) log() *slog.Logger { return r.a.cfg.Logger }

// add appends ids as one segment.
func (r *run) add(kind SegmentKind, ids []int32, logprobs []float32, msg int) {
	if len(ids) == 0 {
		return
	}
	start := len(r.tr.Tokens)
	r.tr.Tokens = append(r.tr.Tokens, ids...)
	if logprobs == nil {
		logprobs = make([]float32, len(ids))
	}
	r.tr.Logprobs = append(r.tr.Logprobs, logprobs...)
	r.tr.Segments = append(r.tr.Segments, Segment{Kind: kind, Start: start, End: len(r.tr.Tokens), Message: msg})
}

// stop records why the episode ended.
func (r *run) stop(reason StopReason, detail string) {
	r.tr.Stop, r.tr.Err = reason, detail
}

// fail classifies err from the policy or the template, returning ctx's error when the
// rollout was canceled.
func (r *run) fail(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		r.stop(StopCanceled, "")
		return ctx.Err()
	case errors.Is(err, ErrTemplateDrift), errors.Is(err, ErrCalibration), errors.Is(err, ErrRoleUnsupported):
		r.stats.TemplateDrift++
		r.stop(StopTemplateDrift, err.Error())
		r.log().Warn("rollout: template drift, episode stopped", "metric", "rollout/template_drift", "err", err)
	default:
		r.stop(StopPolicyError, err.Error())
	}
	return nil
}

// finish drops a trailing generation prompt that opened no turn, so that a trajectory
// always ends with what the last turn or tool step produced.
func (r *run) finish() {
	segs := r.tr.Segments
	if n := len(segs); n > 0 && segs[n-1].Kind == SegGenPrompt {
		r.tr.Tokens = r.tr.Tokens[:segs[n-1].Start]
		r.tr.Logprobs = r.tr.Logprobs[:segs[n-1].Start]
		r.tr.Segments = segs[:n-1]
	}
}

func (r *run) loop(ctx context.Context) error {
	cfg := r.a.cfg
	cal, err := r.a.tmpl.Calibrate(ctx)
	if err != nil {
		return r.fail(ctx, err)
	}
	r.cal = cal
	first, err := r.a.tmpl.Render(ctx, r.tr.Messages, true)
	if err != nil {
		return r.fail(ctx, err)
	}
	if !hasSuffix(first.Tokens, cal.GenerationPrompt) || len(first.Tokens) == len(cal.GenerationPrompt) {
		return r.fail(ctx, &DriftError{Check: "shape", Detail: "the first prompt does not end with the calibrated generation prompt"})
	}
	// Every turn the template opens it closes: a special-token literal in the first
	// messages (a task statement holding "<|im_end|>") would otherwise reach the model
	// as a control token.
	body := first.Tokens[:len(first.Tokens)-len(cal.GenerationPrompt)]
	if starts, closes := count(body, cal.TurnStart), count(body, cal.Close); starts != closes {
		return r.fail(ctx, &DriftError{Check: "shape", Detail: fmt.Sprintf(
			"the first prompt has %d turn-start and %d close tokens (a special-token literal in a message?)", starts, closes)})
	}
	maxLen := first.MaxModelLen
	if maxLen == 0 {
		maxLen = cal.MaxModelLen
	}
	split := len(first.Tokens) - len(cal.GenerationPrompt)
	r.add(SegPrompt, first.Tokens[:split], nil, -1)
	r.add(SegGenPrompt, first.Tokens[split:], nil, len(r.tr.Messages))

	for turn := 0; turn < cfg.MaxTurns; turn++ {
		maxTokens := cfg.MaxTokens
		if maxLen > 0 {
			room := maxLen - len(r.tr.Tokens)
			if room < cfg.MinGenerateTokens {
				r.stop(StopContextLength, fmt.Sprintf("%d prompt tokens leave %d of the model's %d for generation, want at least %d",
					len(r.tr.Tokens), room, maxLen, cfg.MinGenerateTokens))
				return nil
			}
			maxTokens = min(maxTokens, room)
		}
		again, err := r.turn(ctx, turn, maxTokens)
		if err != nil || !again {
			return err
		}
	}
	r.stop(StopMaxTurns, "")
	return nil
}

// turn runs one policy call and the tools it asks for. It reports whether the loop
// goes on.
func (r *run) turn(ctx context.Context, turn, maxTokens int) (bool, error) {
	cfg := r.a.cfg
	tr := r.tr
	genStart := tr.Segments[len(tr.Segments)-1].Start // the SegGenPrompt that opens this turn
	sent := slices.Clone(tr.Tokens)
	g, err := r.a.policy.Generate(ctx, GenerateRequest{
		Prompt: sent, MaxTokens: maxTokens, Sampling: cfg.Sampling, Messages: tr.Messages, Seed: r.seed,
	})
	tr.TurnsUsed++
	if err != nil {
		return false, r.fail(ctx, err)
	}
	if g.PromptTokens != nil && !slices.Equal(g.PromptTokens, sent) {
		r.stats.PromptEchoMismatch++
		r.stop(StopPromptMismatch, fmt.Sprintf("the server echoed a %d-token prompt that differs from the %d tokens sent at position %d",
			len(g.PromptTokens), len(sent), firstDiff(g.PromptTokens, sent)))
		r.log().Warn("rollout: prompt echo mismatch", "metric", "rollout/prompt_echo_mismatch")
		return false, nil
	}
	switch {
	case len(g.Tokens) == 0:
		r.stop(StopPolicyError, "the policy generated no tokens")
		return false, nil
	case len(g.Logprobs) != len(g.Tokens):
		r.stop(StopPolicyError, fmt.Sprintf("the policy returned %d logprobs for %d tokens", len(g.Logprobs), len(g.Tokens)))
		return false, nil
	case g.FinishReason != FinishStop && g.FinishReason != FinishLength:
		r.stop(StopPolicyError, fmt.Sprintf("unexpected finish reason %q", g.FinishReason))
		return false, nil
	}

	msgIdx := len(tr.Messages)
	start := len(tr.Tokens)
	r.add(SegSampled, g.Tokens, g.Logprobs, msgIdx)
	tr.Turns = append(tr.Turns, Turn{Message: msgIdx, GenPromptStart: genStart, Start: start, End: len(tr.Tokens)})
	parsed := cfg.ToolCallParser.Parse(g.Text)
	msg := chat.Message{Role: chat.RoleAssistant, Content: parsed.Content, ReasoningContent: parsed.Reasoning}
	r.log().Debug("rollout: turn", "turn", turn, "tokens", len(g.Tokens), "finish", g.FinishReason, "tool_calls", len(parsed.Calls))

	if g.FinishReason == FinishLength {
		r.stats.TruncatedTurns++
		tr.Turns[len(tr.Turns)-1].Truncated = true
		if !cfg.ContinueTruncated || len(parsed.Calls) == 0 {
			tr.Messages = append(tr.Messages, msg)
			r.stop(StopTruncated, "")
			return false, nil
		}
		r.stats.SynthClose++
		r.add(SegCloseSynth, []int32{r.cal.Close}, nil, msgIdx)
	} else if g.Tokens[len(g.Tokens)-1] != r.cal.Close {
		r.stats.AltClose++
	}
	r.add(SegSeparator, r.cal.Separator, nil, msgIdx)

	if len(parsed.Calls) == 0 {
		tr.Messages = append(tr.Messages, msg)
		r.stop(StopNoToolCalls, "")
		return false, nil
	}
	toolMsgs, err := r.runTools(ctx, turn, parsed.Calls, &msg)
	tr.Messages = append(tr.Messages, msg)
	tr.Messages = append(tr.Messages, toolMsgs...)
	if err != nil {
		r.stop(StopCanceled, "")
		return false, err
	}

	again := turn+1 < cfg.MaxTurns
	d, err := r.a.tmpl.Delta(ctx, toolMsgs, again)
	if err != nil {
		return false, r.fail(ctx, err)
	}
	if !again {
		r.add(SegDelta, d, nil, msgIdx+1)
		r.stop(StopMaxTurns, "")
		return false, nil
	}
	body := len(d) - len(r.cal.GenerationPrompt)
	r.add(SegDelta, d[:body], nil, msgIdx+1)
	r.add(SegGenPrompt, d[body:], nil, len(tr.Messages))
	return true, nil
}

// runTools runs the calls in order and returns one tool message per call; it fills in
// msg.ToolCalls. The error is ctx's, when it ended.
func (r *run) runTools(ctx context.Context, turn int, calls []ParsedCall, msg *chat.Message) ([]chat.Message, error) {
	out := make([]chat.Message, 0, len(calls))
	for i, c := range calls {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		r.stats.ToolCalls++
		id := fmt.Sprintf("call_%d_%d", turn, i)
		args := string(c.Arguments)
		var result string
		switch tool, ok := r.a.tools[c.Name]; {
		case c.Err != nil:
			r.stats.InvalidToolCalls++
			t := &r.tr.Turns[len(r.tr.Turns)-1]
			t.InvalidCalls = append(t.InvalidCalls, len(msg.ToolCalls))
			args = c.Raw
			result = errorResult(`%v. Write each call as <tool_call>{"name": "<tool name>", "arguments": {…}}</tool_call>. Available tools: %s`,
				c.Err, strings.Join(r.a.names, ", "))
		case !ok:
			r.stats.UnknownToolCalls++
			result = errorResult("unknown tool %q. Available tools: %s", c.Name, strings.Join(r.a.names, ", "))
		default:
			result = tool.Call(ctx, r.sb, c.Arguments)
		}
		msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{
			ID: id, Type: "function", Function: chat.FunctionCall{Name: c.Name, Arguments: args},
		})
		out = append(out, chat.Message{
			Role: chat.RoleTool, ToolCallID: id, Name: c.Name,
			Content: capResult(result, r.a.cfg.MaxResultChars),
		})
	}
	return out, nil
}

package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/agentic-opd/agenticopd/chat"
)

// ErrTemplateDrift reports that the server's rendering of appended messages does not
// extend the held tokens the way the calibrated template says it must: the rendering
// of base+messages does not start with the rendering of the base, or the delta does not
// have the shape of whole turns (no BOS, starts with the turn-start token, ends with the
// generation prompt when asked, one turn-start and one close token per rendered turn).
// A tool result or user text that contains a special-token literal such as
// "<|im_end|>" is rendered by the server as the real control token and is caught here
// too. Errors wrapping it are *[DriftError].
var ErrTemplateDrift = errors.New("rollout: template drift")

// ErrCalibration reports that the server's chat template could not be calibrated: the
// generation prompt, close token or separator could not be read off the probe renders.
// The template is then not one this package can append to exactly; the message says
// which probe failed.
var ErrCalibration = errors.New("rollout: template calibration failed")

// ErrRoleUnsupported reports that messages of a role cannot be appended as a delta
// because calibration could not render them prefix-stably on any base.
var ErrRoleUnsupported = errors.New("rollout: role cannot be appended as a token delta")

// DriftError details a failed delta check. It matches [ErrTemplateDrift] with
// errors.Is.
type DriftError struct {
	// Check names the failed check: "prefix" or "shape".
	Check string
	// Detail says what differed.
	Detail string
}

// Error implements error.
func (e *DriftError) Error() string {
	return fmt.Sprintf("rollout: template drift (%s check): %s", e.Check, e.Detail)
}

// Is reports whether target is ErrTemplateDrift.
func (e *DriftError) Is(target error) bool { return target == ErrTemplateDrift }

// TemplateConfig fixes what a [Template] is calibrated for. Both halves of every delta
// are rendered with exactly these values.
type TemplateConfig struct {
	// Tools are the tool definitions sent with every render (they change the system
	// turn, so they must be identical on both sides of a diff).
	Tools []chat.Tool
	// ChatTemplateKwargs are sent explicitly with every render (for example
	// {"enable_thinking": false}); nil sends none.
	ChatTemplateKwargs map[string]any
	// Base is the fixed conversation deltas are diffed against. It must end with a user
	// message. Nil means [DefaultTemplateBase].
	Base []chat.Message
	// ExtraCloses are further end-of-turn ids the model may stop on besides the
	// template's close (for Qwen, <|endoftext|> 151643). They are reported by
	// [Template.Closes]. The agent treats any "stop" that does not end on the close as
	// an alternative close in any case.
	ExtraCloses []int32
}

// DefaultTemplateBase returns the base conversation used when TemplateConfig.Base is
// nil: a system message (so that templates with a default system prompt do not insert
// one) followed by a user message. Each call returns a new slice.
func DefaultTemplateBase() []chat.Message {
	return []chat.Message{
		{Role: chat.RoleSystem, Content: "You are a helpful assistant."},
		{Role: chat.RoleUser, Content: "I am a user."},
	}
}

// Calibration is what a [Template] learnt from the server's chat template.
type Calibration struct {
	// Base is ids(base) rendered without the generation prompt.
	Base []int32
	// GenerationPrompt is G = ids(base, gen=true) minus ids(base).
	GenerationPrompt []int32
	// TurnStart is the token that opens every turn (ChatML <|im_start|>); the first
	// token of G.
	TurnStart int32
	// Close is the template's end-of-turn token (ChatML <|im_end|>).
	Close int32
	// Separator is the template text between a close token and the next turn (ChatML
	// "\n"; empty for Llama-3).
	Separator []int32
	// BOS is the token the template puts before the first turn, or -1 when it puts none.
	BOS int32
	// MergesToolRuns reports that consecutive tool messages render as one turn (Qwen:
	// one user turn of <tool_response> blocks).
	MergesToolRuns bool
	// UserDelta reports whether user messages can be appended (hints use this).
	UserDelta bool
	// ToolBase and UserBase say which base deltas of tool results and of user
	// messages are diffed against: the first of the candidates that rendered the
	// role's probes prefix-stably during calibration (reference
	// multiturn-tokenization §4.2 step 4). ToolBase is BaseFixed or BaseToolCalls;
	// UserBase is BaseFixed or BaseNoUser (meaningful only when UserDelta).
	ToolBase, UserBase BaseKind
	// MaxModelLen is the server's context length as reported while calibrating, 0 if
	// unknown.
	MaxModelLen int
	// BaseWithoutUser is ids(base without its final user message) when UserBase is
	// BaseNoUser, else nil.
	BaseWithoutUser []int32
}

// BaseKind names a base conversation deltas are diffed against.
type BaseKind uint8

// Base kinds. A delta whose diff or shape check fails on the role's calibrated base is
// retried once on the role's other candidate before it is reported as drift
// (reference multiturn-tokenization §4.7).
const (
	// BaseFixed is TemplateConfig.Base, rendered once at calibration.
	BaseFixed BaseKind = iota
	// BaseToolCalls is TemplateConfig.Base plus an assistant turn that calls the
	// tools being answered (same ids and names, arguments {}), with a short inline
	// reasoning block so that Qwen3-style templates render it the same whether or
	// not it is the last message. For templates that render tool messages only after
	// an assistant tool call. It is rendered with every delta, which therefore costs
	// two renders.
	BaseToolCalls
	// BaseNoUser is TemplateConfig.Base without its final user message, for
	// templates whose rendering of a user message depends on an earlier one.
	BaseNoUser
)

// String returns "fixed", "tool_calls" or "no_user".
func (k BaseKind) String() string {
	switch k {
	case BaseFixed:
		return "fixed"
	case BaseToolCalls:
		return "tool_calls"
	case BaseNoUser:
		return "no_user"
	}
	return fmt.Sprintf("BaseKind(%d)", uint8(k))
}

// Template is a server chat template calibrated once for one (policy, tools,
// chat_template_kwargs): it gives the exact token delta for appending messages to a
// conversation held as ids, without re-tokenising anything already held.
//
// Calibration (reference multiturn-tokenization §4.2) renders, through
// [Policy.Render] only: the base B (ending with a user turn) with and without the
// generation prompt (G is the difference), B plus one assistant and one user message,
// twice with user bodies that differ (the close token and the separator the model does
// not generate, as the two renders' common tail), probe tool runs and user messages
// whose contents start and end with newlines (prefix stability per role), and, when
// there are tools, the base without them (a server that ignores "tools" fails
// calibration). A role whose probe fails on B (a render error or a failed check) is
// tried on the role's alternative base (§4.2 step 4): tool runs after an assistant
// turn calling the tools ([BaseToolCalls]), user messages on B without its user
// message ([BaseNoUser]); [Calibration] records the base each role uses. Tool runs
// that fit no base fail calibration; user messages that fit none are refused
// ([ErrRoleUnsupported]). Calibration runs lazily on first use and is cached; a
// calibration that failed for a transient reason (ctx, a policy error) is retried on
// the next call.
//
// A Template is safe for concurrent use.
type Template struct {
	policy Policy
	cfg    TemplateConfig

	mu       sync.Mutex
	cal      *Calibration
	permErr  error         // a calibration failure that retrying cannot fix
	inflight chan struct{} // closed when the running calibration attempt ends
}

// NewTemplate returns a Template for policy p. It does no I/O.
func NewTemplate(p Policy, cfg TemplateConfig) (*Template, error) {
	if p == nil {
		return nil, errors.New("rollout: NewTemplate: nil Policy")
	}
	if cfg.Base == nil {
		cfg.Base = DefaultTemplateBase()
	}
	if len(cfg.Base) == 0 || cfg.Base[len(cfg.Base)-1].Role != chat.RoleUser {
		return nil, errors.New("rollout: NewTemplate: TemplateConfig.Base must end with a user message")
	}
	cfg.Base = chat.Clone(cfg.Base)
	cfg.Tools = slices.Clone(cfg.Tools)
	cfg.ExtraCloses = slices.Clone(cfg.ExtraCloses)
	return &Template{policy: p, cfg: cfg}, nil
}

// Calibrate runs the one-time calibration if it has not succeeded yet and returns its
// result. Concurrent callers share one attempt; a caller whose ctx ends stops waiting
// and leaves the Template unchanged.
func (t *Template) Calibrate(ctx context.Context) (Calibration, error) {
	c, err := t.calibrated(ctx)
	if err != nil {
		return Calibration{}, err
	}
	return *c, nil
}

// GenerationPrompt returns the calibrated generation prompt G, or nil before a
// successful calibration. The caller must not modify it.
func (t *Template) GenerationPrompt() []int32 {
	if c := t.done(); c != nil {
		return c.GenerationPrompt
	}
	return nil
}

// Separator returns the calibrated separator owed after a close token, or nil before a
// successful calibration (it may also be empty after one). The caller must not modify it.
func (t *Template) Separator() []int32 {
	if c := t.done(); c != nil {
		return c.Separator
	}
	return nil
}

// Closes returns the accepted end-of-turn ids: the template's close first, then
// TemplateConfig.ExtraCloses; nil before a successful calibration.
func (t *Template) Closes() []int32 {
	c := t.done()
	if c == nil {
		return nil
	}
	return append([]int32{c.Close}, t.cfg.ExtraCloses...)
}

// Tools returns the tool definitions every render of this Template carries.
func (t *Template) Tools() []chat.Tool { return slices.Clone(t.cfg.Tools) }

// ChatTemplateKwargs returns the kwargs every render of this Template carries.
func (t *Template) ChatTemplateKwargs() map[string]any { return t.cfg.ChatTemplateKwargs }

// Render renders msgs through the policy with this Template's tools and kwargs.
func (t *Template) Render(ctx context.Context, msgs []chat.Message, addGenerationPrompt bool) (Rendered, error) {
	return t.policy.Render(ctx, RenderRequest{
		Messages:            msgs,
		Tools:               t.cfg.Tools,
		AddGenerationPrompt: addGenerationPrompt,
		ChatTemplateKwargs:  t.cfg.ChatTemplateKwargs,
	})
}

// Delta returns the template tokens for appending msgs to a conversation whose last
// turn is closed (and whose separator has been appended): the fixed-base diff
// ids(B+msgs) minus ids(B), with the prefix asserted and the shape checked. With
// addGenerationPrompt the result ends with G.
//
// For a hint before an assistant turn, the opd package calls
// Delta(ctx, []chat.Message{{Role: "user", Content: hint}}, false).
//
// Consecutive tool messages must be passed together (all results of one step): the
// template merges them into one turn. Errors: a calibration error, a policy error,
// [ErrRoleUnsupported] for an assistant message or a role calibration refused, and a
// *[DriftError] (matching [ErrTemplateDrift]) when the checks fail.
func (t *Template) Delta(ctx context.Context, msgs []chat.Message, addGenerationPrompt bool) ([]int32, error) {
	if len(msgs) == 0 {
		return nil, errors.New("rollout: Delta: no messages")
	}
	c, err := t.calibrated(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		switch m.Role {
		case chat.RoleTool, chat.RoleSystem:
		case chat.RoleUser:
			if !c.UserDelta {
				return nil, fmt.Errorf("%w: user (calibration could not append it prefix-stably on any base)", ErrRoleUnsupported)
			}
		default:
			return nil, fmt.Errorf("%w: %q", ErrRoleUnsupported, m.Role)
		}
	}
	return t.delta(ctx, c, msgs, addGenerationPrompt)
}

// delta is Delta without the role gate: the diff on the base calibrated for msgs'
// roles, retried once on the role's other candidate base when it fails its checks.
func (t *Template) delta(ctx context.Context, c *Calibration, msgs []chat.Message, gen bool) ([]int32, error) {
	kind, alt := c.ToolBase, BaseToolCalls
	switch {
	case slices.ContainsFunc(msgs, func(m chat.Message) bool { return m.Role == chat.RoleTool }):
		if kind == BaseToolCalls {
			alt = BaseFixed
		}
	case slices.ContainsFunc(msgs, func(m chat.Message) bool { return m.Role == chat.RoleUser }):
		kind, alt = c.UserBase, BaseNoUser
		if kind == BaseNoUser {
			alt = BaseFixed
		}
		if alt == BaseNoUser && len(t.cfg.Base) < 2 {
			alt = kind
		}
	default:
		kind, alt = BaseFixed, BaseFixed
	}
	d, err := t.deltaOn(ctx, c, kind, msgs, gen)
	if err == nil || alt == kind || !errors.Is(err, ErrTemplateDrift) {
		return d, err
	}
	if d, aerr := t.deltaOn(ctx, c, alt, msgs, gen); aerr == nil {
		return d, nil
	}
	return nil, err
}

// deltaOn is the fixed-base diff of msgs on the base of the given kind, with the
// prefix asserted and the shape checked.
func (t *Template) deltaOn(ctx context.Context, c *Calibration, kind BaseKind, msgs []chat.Message, gen bool) ([]int32, error) {
	base, baseIDs, err := t.base(ctx, c, kind, msgs)
	if err != nil {
		return nil, err
	}
	r, err := t.Render(ctx, append(base, msgs...), gen)
	if err != nil {
		return nil, err
	}
	if !hasPrefix(r.Tokens, baseIDs) {
		return nil, &DriftError{Check: "prefix", Detail: fmt.Sprintf(
			"rendering base (%s)+%d messages does not start with the base rendering (first difference at %d of %d)",
			kind, len(msgs), firstDiff(r.Tokens, baseIDs), len(baseIDs))}
	}
	d := slices.Clone(r.Tokens[len(baseIDs):])
	if err := checkShape(c, d, expectedTurns(c, msgs), gen, t.cfg.ExtraCloses); err != nil {
		return nil, err
	}
	return d, nil
}

// base returns a fresh copy of the base messages of the given kind for a delta of
// msgs, and their ids.
func (t *Template) base(ctx context.Context, c *Calibration, kind BaseKind, msgs []chat.Message) ([]chat.Message, []int32, error) {
	b := chat.Clone(t.cfg.Base)
	switch kind {
	case BaseNoUser:
		if c.BaseWithoutUser == nil {
			return nil, nil, fmt.Errorf("%w: no rendering of the base without its user message", ErrCalibration)
		}
		return b[:len(b)-1], c.BaseWithoutUser, nil
	case BaseToolCalls:
		b = append(b, callingAssistant(msgs))
		r, err := t.Render(ctx, b, false)
		if err != nil {
			return nil, nil, err
		}
		return b, r.Tokens, nil
	}
	return b, c.Base, nil
}

// callingAssistant is the assistant turn of a BaseToolCalls base: one call per tool
// message of msgs, with its id and name.
func callingAssistant(msgs []chat.Message) chat.Message {
	m := chat.Message{Role: chat.RoleAssistant, Content: "<think>\nx\n</think>\n\n"}
	for i, tm := range msgs {
		if tm.Role != chat.RoleTool {
			continue
		}
		id, name := tm.ToolCallID, tm.Name
		if id == "" {
			id = fmt.Sprintf("call_base_%d", i)
		}
		if name == "" {
			name = "tool"
		}
		m.ToolCalls = append(m.ToolCalls, chat.ToolCall{ID: id, Type: "function",
			Function: chat.FunctionCall{Name: name, Arguments: "{}"}})
	}
	return m
}

// expectedTurns is the number of turns msgs render as (without the generation prompt).
func expectedTurns(c *Calibration, msgs []chat.Message) int {
	n := 0
	for i, m := range msgs {
		if m.Role == chat.RoleTool && c.MergesToolRuns && i > 0 && msgs[i-1].Role == chat.RoleTool {
			continue
		}
		n++
	}
	return n
}

// checkShape applies the §4.4 shape rules to a delta.
// extra are further ids (the accepted alternative closes) a delta must not hold.
func checkShape(c *Calibration, d []int32, turns int, gen bool, extra []int32) error {
	shape := func(format string, args ...any) error {
		return &DriftError{Check: "shape", Detail: fmt.Sprintf(format, args...)}
	}
	if len(d) == 0 {
		return shape("empty delta")
	}
	if d[0] != c.TurnStart {
		return shape("delta starts with %d, not the turn-start token %d", d[0], c.TurnStart)
	}
	if c.BOS >= 0 && slices.Contains(d, c.BOS) {
		return shape("delta contains the BOS token %d", c.BOS)
	}
	for _, id := range extra {
		if id != c.Close && slices.Contains(d, id) {
			return shape("delta contains the end-of-turn token %d (a special-token literal in a message?)", id)
		}
	}
	body := d
	wantStarts := turns
	if gen {
		if !hasSuffix(d, c.GenerationPrompt) {
			return shape("delta does not end with the generation prompt")
		}
		body = d[:len(d)-len(c.GenerationPrompt)]
		wantStarts++
	}
	if n := count(d, c.TurnStart); n != wantStarts {
		return shape("delta has %d turn-start tokens, want %d (a special-token literal in a message?)", n, wantStarts)
	}
	if n := count(body, c.Close); n != turns {
		return shape("delta has %d close tokens, want %d (a special-token literal in a message?)", n, turns)
	}
	if !hasSuffix(body, append([]int32{c.Close}, c.Separator...)) {
		return shape("delta's last turn does not end with the close token and separator")
	}
	return nil
}

func hasPrefix(s, prefix []int32) bool {
	return len(s) >= len(prefix) && slices.Equal(s[:len(prefix)], prefix)
}

func hasSuffix(s, suffix []int32) bool {
	return len(s) >= len(suffix) && slices.Equal(s[len(s)-len(suffix):], suffix)
}

func commonSuffix(a, b []int32) []int32 {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return a[len(a)-n:]
}

func firstDiff(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func lastIndex(s []int32, id int32) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == id {
			return i
		}
	}
	return -1
}

func count(s []int32, id int32) int {
	n := 0
	for _, v := range s {
		if v == id {
			n++
		}
	}
	return n
}

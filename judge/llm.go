package judge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/sampling"
)

// Defaults of [LLMConfig].
const (
	DefaultPRMVotes         = 3    // judge samples per turn pair
	DefaultTemperature      = 0.7  // the judge's sampling temperature
	DefaultMaxTokens        = 500  // bound on each judge sample's tokens
	DefaultMaxToolCallChars = 4000 // characters of each tool call's arguments shown to the judge
)

// TruncatedSuffix is appended to a message cut by [Truncate].
const TruncatedSuffix = "\n...[truncated]"

// ErrInvalidConfig is wrapped by the errors of [NewLLM] for a configuration it cannot
// use.
var ErrInvalidConfig = errors.New("judge: invalid config")

// LLMConfig configures an [LLM] judge. The zero value of every field is its documented
// default.
type LLMConfig struct {
	// PRMVotes is the number of judge samples per turn; 0 means 3. All votes are asked
	// for in one chat request with n = PRMVotes.
	PRMVotes int
	// Sampling is sent with every request. Its Temperature 0 means 0.7 (the
	// reference's); a negative Temperature asks for greedy decoding (temperature 0),
	// which makes every vote the same. Its other zero values are off: no truncation, no
	// penalty (see package sampling). The judge's output is not trained on, so any
	// valid setting is accepted.
	Sampling sampling.Params
	// MaxTokens caps each vote's output; 0 means 500. A reasoning model may need more to
	// reach its \boxed{…} decision: a vote cut at MaxTokens is never read
	// ([UnparsedTruncated]).
	MaxTokens int
	// Selection picks the hint from the votes; nil means [Majority].
	Selection Selector
	// MaxToolCallChars cuts the arguments of each tool call shown to the judge, as the
	// next state is cut (see [Truncate]); 0 means 4000, negative means no cut.
	MaxToolCallChars int
	// ChatTemplateKwargs are sent with every request. Nil means
	// {"enable_thinking": false}, which turns thinking off in Qwen3-style templates (a
	// template that does not know the key ignores it): a thinking judge spends
	// MaxTokens on reasoning and, behind a reasoning parser, answers with no content.
	// An empty non-nil map sends {}.
	ChatTemplateKwargs map[string]any
	// SystemPrompt replaces the built-in system message ([SystemPrompt]) when set. It
	// must keep the output contract that [ParseVote] reads.
	SystemPrompt string
	// Logger receives failed requests at warn level, and once a warning when the
	// ChatModel does not report why it ended a choice (such a vote is not read:
	// [UnparsedUnknownFinish]); nil means no logging.
	Logger *slog.Logger
}

// LLM is a [Judge] that asks a chat model, through a process-reward-model prompt, for
// PRMVotes verdicts on a turn and selects a hint from them. It is safe for concurrent
// use.
type LLM struct {
	model ChatModel
	cfg   LLMConfig
	// noFinish warns once that the model did not report a finish reason.
	noFinish sync.Once
}

// NewLLM returns an LLM judge that talks to model. It does no I/O.
func NewLLM(model ChatModel, cfg LLMConfig) (*LLM, error) {
	if model == nil {
		return nil, fmt.Errorf("%w: nil ChatModel", ErrInvalidConfig)
	}
	if cfg.PRMVotes < 0 {
		return nil, fmt.Errorf("%w: PRMVotes is %d, want ≥ 0 (0 means %d)", ErrInvalidConfig, cfg.PRMVotes, DefaultPRMVotes)
	}
	if cfg.MaxTokens < 0 {
		return nil, fmt.Errorf("%w: MaxTokens is %d, want ≥ 0 (0 means %d)", ErrInvalidConfig, cfg.MaxTokens, DefaultMaxTokens)
	}
	if cfg.PRMVotes == 0 {
		cfg.PRMVotes = DefaultPRMVotes
	}
	switch {
	case cfg.Sampling.Temperature == 0:
		cfg.Sampling.Temperature = DefaultTemperature
	case cfg.Sampling.Temperature < 0:
		cfg.Sampling.Temperature = 0
	}
	if err := cfg.Sampling.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.ChatTemplateKwargs == nil {
		cfg.ChatTemplateKwargs = map[string]any{"enable_thinking": false}
	}
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	if cfg.Selection == nil {
		cfg.Selection = Majority
	}
	if cfg.MaxToolCallChars == 0 {
		cfg.MaxToolCallChars = DefaultMaxToolCallChars
	}
	if cfg.SystemPrompt == "" {
		cfg.SystemPrompt = SystemPrompt
	}
	return &LLM{model: model, cfg: cfg}, nil
}

// Judge asks the model for the votes on turn and returns the selected hint with every
// vote. Output that does not parse and requests that fail become votes with Score 0
// and a reason in [Vote.Unparsed]; the only error is ctx's.
func (l *LLM) Judge(ctx context.Context, turn Turn) (Hint, error) {
	if err := ctx.Err(); err != nil {
		return Hint{}, err
	}
	votes, err := l.vote(ctx, l.Prompt(turn))
	if err != nil {
		return Hint{}, err
	}
	return Hint{Text: l.cfg.Selection(votes), Votes: votes}, nil
}

// vote asks for PRMVotes choices in one request, then for any missing choice in
// separate single-choice requests.
func (l *LLM) vote(ctx context.Context, msgs []chat.Message) ([]Vote, error) {
	n := l.cfg.PRMVotes
	votes := make([]Vote, 0, n)
	resp, err := l.model.Chat(ctx, l.request(msgs, n))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		l.warn(ctx, err, n)
		for range n {
			votes = append(votes, Vote{Unparsed: UnparsedRequestFailed})
		}
		return votes, nil
	}
	for i := range resp.Choices[:min(n, len(resp.Choices))] {
		votes = append(votes, voteOf(resp, i))
	}
	rest := make([]Vote, n-len(votes))
	var g errgroup.Group
	for i := range rest {
		g.Go(func() error {
			resp, err := l.model.Chat(ctx, l.request(msgs, 1))
			switch {
			case err != nil && ctx.Err() != nil:
				return ctx.Err()
			case err != nil:
				l.warn(ctx, err, 1)
				rest[i] = Vote{Unparsed: UnparsedRequestFailed}
			case len(resp.Choices) == 0:
				rest[i] = Vote{Unparsed: UnparsedMissingChoice}
			default:
				rest[i] = voteOf(resp, 0)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	votes = append(votes, rest...)
	l.checkFinish(ctx, votes)
	return votes, nil
}

func (l *LLM) request(msgs []chat.Message, n int) ChatRequest {
	return ChatRequest{Messages: msgs, N: n, Sampling: l.cfg.Sampling.Resolved(), MaxTokens: l.cfg.MaxTokens, ChatTemplateKwargs: l.cfg.ChatTemplateKwargs}
}

// voteOf reads choice i of resp. A choice the server did not end with a stop is not
// parsed: cut at max_tokens it is [UnparsedTruncated], ended otherwise
// [UnparsedUnfinished], ended for a reason the server did not give (none reported, or
// "") [UnparsedUnknownFinish]. An empty content is [UnparsedEmptyContent], whatever
// reasoning came with it: a decision found in reasoning is a thought, not an answer.
func voteOf(resp ChatResponse, i int) Vote {
	raw := resp.Choices[i]
	finish := ""
	if i < len(resp.FinishReasons) {
		finish = resp.FinishReasons[i]
	}
	switch {
	case finish == "":
		return Vote{Raw: raw, Unparsed: UnparsedUnknownFinish}
	case finish == "length":
		return Vote{Raw: raw, Unparsed: UnparsedTruncated}
	case finish != "stop":
		return Vote{Raw: raw, Unparsed: UnparsedUnfinished}
	case strings.TrimSpace(raw) == "":
		return Vote{Raw: raw, Unparsed: UnparsedEmptyContent}
	}
	return ParseVote(raw)
}

// checkFinish warns once when a vote's finish reason was unknown.
func (l *LLM) checkFinish(ctx context.Context, votes []Vote) {
	if l.cfg.Logger == nil || !slices.ContainsFunc(votes, func(v Vote) bool { return v.Unparsed == UnparsedUnknownFinish }) {
		return
	}
	l.noFinish.Do(func() {
		l.cfg.Logger.WarnContext(ctx, "judge: the chat model did not say why it ended a choice (finish_reason null or absent); "+
			"such a vote may have been cut mid-thought and is not read (counted as unparsable, reason "+UnparsedUnknownFinish+"); "+
			"judge with a server that reports finish reasons")
	})
}

func (l *LLM) warn(ctx context.Context, err error, votes int) {
	if l.cfg.Logger != nil {
		l.cfg.Logger.WarnContext(ctx, "judge: chat request failed; counting its votes as unparsed", "votes", votes, "err", err)
	}
}

// SystemPrompt is the LLM judge's built-in system message: the reference's contract
// (a process reward model extracting hindsight hints, the meaning of a user or tool next
// state, exactly one \boxed{1} or \boxed{-1}, a concrete 1–3 sentence hint between
// [HINT_START] and [HINT_END] only for 1), in this library's words.
const SystemPrompt = `You are a process reward model. Your job is hindsight hint extraction.

You are shown two things:
1. The assistant's response at turn t. It includes any tool calls the assistant made, each on its own line as "[tool call: NAME] ARGUMENTS".
2. The state that followed at turn t+1, labelled with its role.

How to read the next state:
- role 'user': a reply from the user, such as a follow-up question, a correction or feedback on the response.
- role 'tool': the value a tool returned because the assistant called it. A successful result without errors generally means the call was a good one. Do not treat what a tool returned as something the assistant should have known before calling it.

Your task: decide whether the next state reveals, in hindsight, information that would have made the turn-t response better.

Output rules, to be followed strictly:
- Give exactly one decision: \boxed{1} if the next state reveals such information, \boxed{-1} if it does not.
- If and only if your decision is \boxed{1}, also write a hint of one to three sentences between [HINT_START] and [HINT_END]. The hint must be concrete and actionable: say what the assistant should have done differently.
- If your decision is \boxed{-1}, write no hint block.`

// Prompt returns the chat messages the judge sends for turn: [SystemPrompt] (or the
// configured one) and a user message laid out as the reference's, with the
// assistant's tool calls shown after its text:
//
//	## Assistant response (turn t)
//	TEXT
//	[tool call: NAME] ARGUMENTS
//
//	## Next state (turn t+1) [role: ROLE]
//	NEXT STATE
//
//	Now output your decision and (if positive) the hint in the required format.
func (l *LLM) Prompt(turn Turn) []chat.Message {
	var b strings.Builder
	b.WriteString("## Assistant response (turn t)\n")
	b.WriteString(turn.Assistant.Content)
	for _, c := range turn.Assistant.ToolCalls {
		if !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		args := c.Function.Arguments
		if l.cfg.MaxToolCallChars > 0 {
			args = Truncate(args, l.cfg.MaxToolCallChars)
		}
		fmt.Fprintf(&b, "[tool call: %s] %s", c.Function.Name, args)
	}
	fmt.Fprintf(&b, "\n\n## Next state (turn t+1) [role: %s]\n%s\n\n", turn.NextStateRole, turn.NextState)
	b.WriteString("Now output your decision and (if positive) the hint in the required format.")
	return []chat.Message{
		{Role: chat.RoleSystem, Content: l.cfg.SystemPrompt},
		{Role: chat.RoleUser, Content: b.String()},
	}
}

// Truncate cuts s to its first max code points and appends [TruncatedSuffix] when it
// is longer than max code points, as the reference cuts each next-state message.
func Truncate(s string, max int) string {
	if max < 0 || len(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + TruncatedSuffix
		}
		n++
	}
	return s
}

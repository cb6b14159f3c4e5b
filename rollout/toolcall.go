package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidToolCall reports a tool call the parser could not read: invalid JSON, a
// missing name, arguments that are not an object, or a block without its closing tag.
var ErrInvalidToolCall = errors.New("invalid tool call")

// ToolCallParser reads an assistant turn's generated text. It only decides what to
// execute and what the OpenAI-format message says; token ids never come from it.
//
// Implementations must be safe for concurrent use.
type ToolCallParser interface {
	// Parse splits text (decoded with special tokens kept) into the message content,
	// the reasoning if the format separates it, and the tool calls in order.
	Parse(text string) ParsedTurn
}

// ToolCallParserFunc adapts a function to a ToolCallParser.
type ToolCallParserFunc func(text string) ParsedTurn

// Parse calls f(text).
func (f ToolCallParserFunc) Parse(text string) ParsedTurn { return f(text) }

// ParsedTurn is what a [ToolCallParser] read from one generated turn.
type ParsedTurn struct {
	// Content is the text before the first tool call, trimmed, without reasoning and
	// without a trailing end-of-turn literal.
	Content string
	// Reasoning is the text of a leading <think>…</think> block, trimmed; "" if none.
	Reasoning string
	// Calls are the tool calls in the order they were written, including invalid ones.
	Calls []ParsedCall
}

// ParsedCall is one tool call. When Err is non-nil the call is not executed; the model
// gets Err (wrapping [ErrInvalidToolCall]) as the call's result.
type ParsedCall struct {
	// Name is the function name; it may be "" when Err is set.
	Name string
	// Arguments is a JSON object; "{}" when the call gave none.
	Arguments json.RawMessage
	// Raw is the text between the call's tags, as generated.
	Raw string
	// Err says why the call is invalid; nil for a valid call.
	Err error
}

// Hermes is the [ToolCallParser] for the Hermes format used by Qwen2.5/Qwen3 and
// Hermes models: every <tool_call>{"name": …, "arguments": …}</tool_call> block, several
// per turn, with arguments given either as an object or as a JSON string holding one.
// A block without its closing tag (a turn cut at max_tokens) is an invalid call, and
// nothing after it is read.
//
// Text up to the first </think> is reasoning when the text opens with <think>, or when
// no <tool_call> comes before it (the generation prompt may already hold <think>): it
// goes to ParsedTurn.Reasoning and tool-call tags inside it are ignored.
//
// The zero value is ready to use.
type Hermes struct {
	// EndLiterals are end-of-turn literals removed from the end of the text before
	// parsing. Nil means [DefaultEndLiterals].
	EndLiterals []string
}

// DefaultEndLiterals returns the end-of-turn strings [Hermes] strips from generated
// text: ChatML's and Llama-3's close tokens and common EOS strings. Each call returns a
// new slice.
func DefaultEndLiterals() []string {
	return []string{"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "</s>"}
}

const (
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
)

// Parse implements ToolCallParser.
func (h Hermes) Parse(text string) ParsedTurn {
	ends := h.EndLiterals
	if ends == nil {
		ends = DefaultEndLiterals()
	}
	text = trimEndLiterals(text, ends)
	var out ParsedTurn
	if i := strings.Index(text, "</think>"); i >= 0 &&
		(strings.HasPrefix(strings.TrimSpace(text), "<think>") || !strings.Contains(text[:i], toolCallOpen)) {
		out.Reasoning = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text[:i]), "<think>"))
		text = text[i+len("</think>"):]
	}
	first := strings.Index(text, toolCallOpen)
	if first < 0 {
		out.Content = strings.TrimSpace(text)
		return out
	}
	out.Content = strings.TrimSpace(text[:first])
	rest := text[first:]
	for {
		i := strings.Index(rest, toolCallOpen)
		if i < 0 {
			return out
		}
		rest = rest[i+len(toolCallOpen):]
		j := strings.Index(rest, toolCallClose)
		if j < 0 {
			out.Calls = append(out.Calls, ParsedCall{
				Raw: rest,
				Err: fmt.Errorf("%w: <tool_call> without </tool_call>", ErrInvalidToolCall),
			})
			return out
		}
		out.Calls = append(out.Calls, parseHermesCall(rest[:j]))
		rest = rest[j+len(toolCallClose):]
	}
}

func trimEndLiterals(text string, ends []string) string {
	for changed := true; changed; {
		changed = false
		t := strings.TrimRight(text, " \t\r\n")
		for _, e := range ends {
			if e != "" && strings.HasSuffix(t, e) {
				text, changed = strings.TrimSuffix(t, e), true
			}
		}
	}
	return text
}

// parseHermesCall reads the JSON inside one <tool_call> block.
func parseHermesCall(raw string) ParsedCall {
	call := ParsedCall{Raw: raw}
	invalid := func(format string, args ...any) ParsedCall {
		call.Err = fmt.Errorf("%w: %s", ErrInvalidToolCall, fmt.Sprintf(format, args...))
		return call
	}
	var body struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&body); err != nil {
		// Keep the name if it can be read, so the error can say which tool it was for.
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal([]byte(raw), &named) == nil {
			call.Name = named.Name
		}
		return invalid("the JSON does not parse: %v", err)
	}
	if dec.More() || dec.InputOffset() < int64(len(strings.TrimRight(raw, " \t\r\n"))) {
		return invalid("text after the JSON object")
	}
	if body.Name == nil || *body.Name == "" {
		return invalid(`missing "name"`)
	}
	call.Name = *body.Name
	args, err := normaliseArguments(body.Arguments)
	if err != nil {
		return invalid("%v", err)
	}
	call.Arguments = args
	return call
}

// normaliseArguments accepts an object, a JSON string holding an object ("" = {}), or
// nothing, and returns a compact JSON object.
func normaliseArguments(a json.RawMessage) (json.RawMessage, error) {
	a = bytes.TrimSpace(a)
	if len(a) == 0 || bytes.Equal(a, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if a[0] == '"' {
		var s string
		if err := json.Unmarshal(a, &s); err != nil {
			return nil, fmt.Errorf(`"arguments" string: %v`, err)
		}
		if strings.TrimSpace(s) == "" {
			return json.RawMessage("{}"), nil
		}
		a = []byte(s)
		if !json.Valid(a) {
			return nil, errors.New(`"arguments" string is not valid JSON`)
		}
		a = bytes.TrimSpace(a)
	}
	if a[0] != '{' {
		return nil, errors.New(`"arguments" must be a JSON object`)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, a); err != nil {
		return nil, fmt.Errorf(`"arguments": %v`, err)
	}
	return json.RawMessage(buf.Bytes()), nil
}

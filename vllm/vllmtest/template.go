package vllmtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/agentic-opd/agenticopd/chat"
)

// wireMessage is a chat message as vLLM accepts it: content may be a string, null or a
// list of text parts, and tool-call arguments may be a JSON string or an object.
type wireMessage struct {
	Role             string         `json:"role"`
	Content          wireContent    `json:"content"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`
	Name             string         `json:"name,omitempty"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type wireContent string

func (c *wireContent) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = wireContent(s)
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("content must be a string, null or a list of text parts")
	}
	var sb strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			return fmt.Errorf("content part %d has type %q; only text parts are supported", i, p.Type)
		}
		if i > 0 {
			sb.WriteString("\n")
		}
		sb.WriteString(p.Text)
	}
	*c = wireContent(sb.String())
	return nil
}

// renderParams are the chat-template inputs besides the messages.
type renderParams struct {
	tools               []json.RawMessage
	addGenerationPrompt bool
	continueFinal       bool
	enableThinking      *bool
	thinkingTemplate    bool
	thinkingOnly        bool // the generation prompt always opens a thought
}

const toolsHeader = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
	"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"

const toolsFooter = "\n</tools>\n\nFor each function call, return a json object with function name and " +
	"arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n" +
	"{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"

// renderChat renders msgs with the Qwen-style ChatML template (see the package doc).
func renderChat(msgs []wireMessage, p renderParams) (string, error) {
	if p.continueFinal && p.addGenerationPrompt {
		//lint:ignore ST1005 the text is vLLM's own, word for word
		return "", errors.New("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
	}
	var b strings.Builder
	first := 0
	if len(p.tools) > 0 {
		b.WriteString("<|im_start|>system\n")
		if len(msgs) > 0 && msgs[0].Role == chat.RoleSystem {
			b.WriteString(string(msgs[0].Content))
			b.WriteString("\n\n")
			first = 1
		}
		b.WriteString(toolsHeader)
		for i, t := range p.tools {
			s, err := toolJSON(t)
			if err != nil {
				return "", fmt.Errorf("tools[%d]: %v", i, err)
			}
			b.WriteString("\n")
			b.WriteString(s)
		}
		b.WriteString(toolsFooter)
	} else if len(msgs) > 0 && msgs[0].Role == chat.RoleSystem {
		fmt.Fprintf(&b, "<|im_start|>system\n%s<|im_end|>\n", msgs[0].Content)
		first = 1
	}
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		c := string(msgs[i].Content)
		if msgs[i].Role == chat.RoleUser && !(strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i := first; i < len(msgs); i++ {
		m := msgs[i]
		switch m.Role {
		case chat.RoleSystem, chat.RoleUser:
			fmt.Fprintf(&b, "<|im_start|>%s\n%s<|im_end|>\n", m.Role, m.Content)
		case chat.RoleAssistant:
			if err := renderAssistant(&b, m, p.thinkingTemplate, i > lastQuery, i == len(msgs)-1); err != nil {
				return "", fmt.Errorf("messages[%d]: %v", i, err)
			}
		case chat.RoleTool:
			if i == 0 || msgs[i-1].Role != chat.RoleTool {
				b.WriteString("<|im_start|>user")
			}
			fmt.Fprintf(&b, "\n<tool_response>\n%s\n</tool_response>", m.Content)
			if i == len(msgs)-1 || msgs[i+1].Role != chat.RoleTool {
				b.WriteString("<|im_end|>\n")
			}
		default:
			return "", fmt.Errorf("messages[%d]: unknown role %q (want system, user, assistant or tool)", i, m.Role)
		}
	}
	out := b.String()
	if p.continueFinal {
		if len(msgs) == 0 {
			return "", errors.New("continue_final_message needs at least one message")
		}
		// As Hugging Face's apply_chat_template: cut after the last occurrence of the
		// stripped final message, keeping its trailing whitespace when the rendering
		// kept it too (and the message has no leading whitespace).
		final := string(msgs[len(msgs)-1].Content)
		stripped := strings.TrimSpace(final)
		j := strings.LastIndex(out, stripped)
		if j < 0 {
			return "", errors.New("continue_final_message is set but the final message does not appear in the chat after applying the chat template")
		}
		if lstripped := strings.TrimLeftFunc(final, unicode.IsSpace); strings.HasPrefix(out[j:], final) && len(lstripped) == len(final) {
			return out[:j+len(final)], nil
		}
		return out[:j+len(stripped)], nil
	}
	if p.addGenerationPrompt {
		out += "<|im_start|>assistant\n"
		switch {
		case p.thinkingOnly:
			out += "<think>\n"
		case p.enableThinking != nil && !*p.enableThinking:
			out += "<think>\n\n</think>\n\n"
		}
	}
	return out, nil
}

// renderAssistant writes one assistant turn. With the thinking template, reasoning is
// split from the content and kept only for turns after the last user query (afterQuery).
func renderAssistant(b *strings.Builder, m wireMessage, thinking, afterQuery, last bool) error {
	content := string(m.Content)
	b.WriteString("<|im_start|>assistant\n")
	if !thinking {
		b.WriteString(content)
	} else {
		reasoning := ""
		if m.ReasoningContent != nil {
			reasoning = *m.ReasoningContent
		} else if first := strings.Index(content, "</think>"); first >= 0 {
			// Qwen3: reasoning is split('</think>')[0].rstrip('\n').split('<think>')[-1]
			// .lstrip('\n'), content is split('</think>')[-1].lstrip('\n').
			before := strings.TrimRight(content[:first], "\n")
			if k := strings.LastIndex(before, "<think>"); k >= 0 {
				before = before[k+len("<think>"):]
			}
			reasoning = strings.TrimLeft(before, "\n")
			last := strings.LastIndex(content, "</think>")
			content = strings.TrimLeft(content[last+len("</think>"):], "\n")
		}
		if afterQuery && (last || reasoning != "") {
			fmt.Fprintf(b, "<think>\n%s\n</think>\n\n%s", strings.Trim(reasoning, "\n"), strings.TrimLeft(content, "\n"))
		} else {
			b.WriteString(content)
		}
	}
	for k, tc := range m.ToolCalls {
		if k > 0 || content != "" {
			b.WriteString("\n")
		}
		args, err := toolCallArguments(tc.Function.Arguments)
		if err != nil {
			return fmt.Errorf("tool_calls[%d]: %v", k, err)
		}
		fmt.Fprintf(b, "<tool_call>\n{\"name\": \"%s\", \"arguments\": %s}\n</tool_call>", tc.Function.Name, args)
	}
	b.WriteString("<|im_end|>\n")
	return nil
}

// toolCallArguments parses arguments (a JSON string holding an object, or an object) and
// re-serialises them as the template's tojson does; vLLM parses string arguments before
// rendering, and an empty string becomes {}.
func toolCallArguments(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		if strings.TrimSpace(s) == "" {
			return "{}", nil
		}
		raw = json.RawMessage(s)
	}
	if !json.Valid(raw) {
		return "", fmt.Errorf("arguments are not valid JSON: %q", raw)
	}
	out, err := pyJSON(raw)
	if err != nil {
		return "", fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	return out, nil
}

// parseToolCalls finds Hermes-style <tool_call>{json}</tool_call> blocks in generated
// text, as vLLM's hermes tool parser does: its regex also takes a last block left
// unclosed (to the end of the text), and every block must be a JSON object with a
// string "name" and an "arguments" member, or the whole text stays content. ok is false
// when there are no blocks or one does not parse; content is then the whole text.
func parseToolCalls(text string, idBase string) (content string, calls []chat.ToolCall, ok bool) {
	i := strings.Index(text, "<tool_call>")
	if i < 0 {
		return text, nil, false
	}
	rest := text[i:]
	for k := 0; ; k++ {
		s := strings.Index(rest, "<tool_call>")
		if s < 0 {
			break
		}
		var body string
		if e := strings.Index(rest[s:], "</tool_call>"); e >= 0 {
			body = rest[s+len("<tool_call>") : s+e]
			rest = rest[s+e+len("</tool_call>"):]
		} else {
			body = rest[s+len("<tool_call>"):]
			rest = ""
		}
		var call struct {
			Name      *string         `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &call); err != nil || call.Name == nil || call.Arguments == nil {
			return text, nil, false
		}
		args, err := pyJSON(call.Arguments)
		if err != nil {
			return text, nil, false
		}
		calls = append(calls, chat.ToolCall{
			ID:       idBase + strconv.Itoa(k),
			Type:     "function",
			Function: chat.FunctionCall{Name: *call.Name, Arguments: args},
		})
	}
	return text[:i], calls, true
}

// parseConversation reads a rendered ChatML prompt back into messages. The open turn at
// the end (the generation prompt) is not a message. The tools section of the system
// prompt is removed; hasTools reports whether there was one.
//
// calls, when not nil, remembers the tool calls of assistant turns across calls.
func parseConversation(text string, calls *callCache) (msgs []chat.Message, hasTools bool) {
	blocks := strings.Split(text, "<|im_start|>")
	for _, blk := range blocks[1:] {
		body, closed := strings.CutSuffix(strings.TrimSuffix(blk, "\n"), "<|im_end|>")
		if !closed {
			continue // the generation prompt or a partial turn
		}
		role, content, _ := strings.Cut(body, "\n")
		switch role {
		case chat.RoleSystem:
			if j := strings.Index(content, "# Tools\n\n"); j >= 0 && strings.Contains(content[j:], "<tools>") {
				hasTools = true
				content = strings.TrimSuffix(content[:j], "\n\n")
				if content == "" && len(msgs) == 0 {
					continue
				}
			}
			msgs = append(msgs, chat.Message{Role: role, Content: content})
		case chat.RoleUser:
			if rs, ok := splitToolResponses(content); ok {
				for _, r := range rs {
					msgs = append(msgs, chat.Message{Role: chat.RoleTool, Content: r})
				}
				continue
			}
			msgs = append(msgs, chat.Message{Role: role, Content: content})
		case chat.RoleAssistant:
			m := chat.Message{Role: role}
			if rest, ok := strings.CutPrefix(content, "<think>\n"); ok {
				if r, after, ok := strings.Cut(rest, "\n</think>\n\n"); ok {
					m.ReasoningContent = r
					content = after
				}
			}
			if c, tc, ok := calls.parse(content); ok {
				m.Content = strings.TrimSuffix(c, "\n")
				m.ToolCalls = tc
			} else {
				m.Content = content
			}
			msgs = append(msgs, m)
		default:
			msgs = append(msgs, chat.Message{Role: role, Content: content})
		}
	}
	return msgs, hasTools
}

// callCache remembers what parseToolCalls makes of an assistant turn's text with
// idBase "call_": a conversation is read back every turn, its earlier turns
// unchanged. It is safe for concurrent use; a nil *callCache remembers nothing.
type callCache struct {
	mu    sync.RWMutex
	m     map[string]parsedCalls
	bytes int // the length of m's keys
}

// maxCallCacheBytes bounds the text of the turns a callCache holds.
const maxCallCacheBytes = 16 << 20

type parsedCalls struct {
	content string
	calls   []chat.ToolCall
	ok      bool
}

// parse is parseToolCalls(text, "call_"); the calls it returns are the caller's.
func (cc *callCache) parse(text string) (string, []chat.ToolCall, bool) {
	if cc == nil || !strings.Contains(text, "<tool_call>") {
		return parseToolCalls(text, "call_")
	}
	cc.mu.RLock()
	p, ok := cc.m[text]
	cc.mu.RUnlock()
	if !ok {
		key := strings.Clone(text) // not the request's text, which it would keep
		p.content, p.calls, p.ok = parseToolCalls(key, "call_")
		cc.mu.Lock()
		if cc.bytes+len(key) > maxCallCacheBytes {
			clear(cc.m)
			cc.bytes = 0
		}
		if cc.m == nil {
			cc.m = map[string]parsedCalls{}
		}
		if _, dup := cc.m[key]; !dup {
			cc.m[key] = p
			cc.bytes += len(key)
		}
		cc.mu.Unlock()
	}
	return p.content, slices.Clone(p.calls), p.ok
}

// splitToolResponses splits a user turn made only of <tool_response> blocks.
func splitToolResponses(body string) ([]string, bool) {
	if !strings.HasPrefix(body, "\n<tool_response>\n") && !strings.HasPrefix(body, "<tool_response>\n") {
		return nil, false
	}
	var out []string
	rest := body
	for rest != "" {
		r, ok := strings.CutPrefix(rest, "\n")
		if !ok && len(out) > 0 {
			return nil, false
		}
		r, ok = strings.CutPrefix(r, "<tool_response>\n")
		if !ok {
			return nil, false
		}
		c, after, ok := strings.Cut(r, "\n</tool_response>")
		if !ok {
			return nil, false
		}
		out = append(out, c)
		rest = after
	}
	return out, true
}

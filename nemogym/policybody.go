package nemogym

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// A rollout's request bodies grow with it: every call sends the whole conversation,
// each earlier assistant turn with its call's token fields, the prompt ids of which
// hold every earlier prompt and generation. Most of each body is the body of the call
// before. So the Session writes each call's token fields once (copying the earlier
// call's prompt and generation ids, as text, into the prompt ids: the prompt extends
// them, which Generate checks) and each message once with them, keeping the messages
// written so far in one buffer that only grows; a body is that buffer's prefix and
// the request's other keys, sent as they are, without being copied into one slice.
// The bytes sent are those the body would be written as from scratch.

// tokenFrag is one call's token fields as JSON object members, with where the ids
// inside the prompt's and the generation's lists lie in it.
type tokenFrag struct {
	b                  []byte
	promptLo, promptHi int
	genLo, genHi       int
}

func (f *tokenFrag) promptText() []byte { return f.b[f.promptLo:f.promptHi] }
func (f *tokenFrag) genText() []byte    { return f.b[f.genLo:f.genHi] }

// tokenMembers writes a call's token fields as JSON object members:
//
//	"prompt_token_ids":[…],"generation_token_ids":[…],"generation_log_probs":[…]
//
// When prev is not nil, t's prompt must begin with prev's call's prompt and then its
// generation (prevInfo), whose ids are copied as prev wrote them rather than written
// again.
func tokenMembers(t TokenInfo, prevInfo *TokenInfo, prev *tokenFrag) (tokenFrag, error) {
	ids := t.PromptTokenIDs
	var f tokenFrag
	size := 64 + 7*(len(t.PromptTokenIDs)+len(t.GenerationTokenIDs)) + 12*len(t.GenerationLogProbs)
	if prev != nil {
		size = 64 + len(prev.b) + 7*(len(t.PromptTokenIDs)-len(prevInfo.PromptTokenIDs)) + 12*len(t.GenerationLogProbs)
	}
	b := append(make([]byte, 0, size), `"prompt_token_ids":[`...)
	f.promptLo = len(b)
	if prev != nil {
		b = append(b, prev.promptText()...)
		if len(prevInfo.PromptTokenIDs) > 0 && len(prevInfo.GenerationTokenIDs) > 0 {
			b = append(b, ',')
		}
		b = append(b, prev.genText()...)
		ids = ids[len(prevInfo.PromptTokenIDs)+len(prevInfo.GenerationTokenIDs):]
	}
	b = appendIDs(b, len(b) > f.promptLo, ids)
	f.promptHi = len(b)
	b = append(b, `],"generation_token_ids":[`...)
	f.genLo = len(b)
	b = appendIDs(b, false, t.GenerationTokenIDs)
	f.genHi = len(b)
	b = append(b, `],"generation_log_probs":`...)
	b, err := appendFloats(b, t.GenerationLogProbs)
	f.b = b
	return f, err
}

// appendIDs appends ids separated by commas, and a comma before them when comma.
func appendIDs(b []byte, comma bool, ids []int32) []byte {
	for _, id := range ids {
		if comma {
			b = append(b, ',')
		}
		b = jsonscan.AppendInt32(b, id)
		comma = true
	}
	return b
}

// msgCache is a Session's messages written as JSON, each with the token fields of
// the call it is attached to (see withTokens), separated by commas, in one buffer:
// msgs[i] (a copy) was written with frag[i] (a call, or -1) and ends at ends[i] in
// body. Bytes of body below its length are never written again: bodies sent earlier
// hold them.
type msgCache struct {
	msgs []chat.Message
	frag []int
	ends []int
	body []byte
}

// messages returns msgs written as the "messages" list's elements, each assistant
// message with its call's token fields (frags in call order go to the last
// len(frags) assistant messages, in order). The messages that begin msgs as they
// began the previous call's, with the same token fields, are not written again. The
// frags written into the buffer are pointed at their copy there.
func (c *msgCache) messages(msgs []chat.Message, frags []tokenFrag) ([]byte, error) {
	attach := make([]int, len(msgs)) // the call whose fields message i carries, or -1
	var assistants []int
	for i, m := range msgs {
		attach[i] = -1
		if m.Role == chat.RoleAssistant {
			assistants = append(assistants, i)
		}
	}
	if len(assistants) < len(frags) {
		return nil, fmt.Errorf("the conversation has %d assistant messages for %d earlier calls", len(assistants), len(frags))
	}
	for j, i := range assistants[len(assistants)-len(frags):] {
		attach[i] = j
	}
	n := 0
	for n < len(msgs) && n < len(c.msgs) && c.frag[n] == attach[n] && sameMessage(&c.msgs[n], &msgs[n]) {
		n++
	}
	if n < len(msgs) && n < len(c.msgs) {
		// The conversation differs from the cached one at n: a new buffer from there,
		// since earlier bodies hold the old one's bytes.
		keep := 0
		if n > 0 {
			keep = c.ends[n-1]
		}
		c.body = append(make([]byte, 0, 2*keep), c.body[:keep]...)
		c.msgs, c.frag, c.ends = c.msgs[:n], c.frag[:n], c.ends[:n]
	}
	if need := bodyGrowth(msgs[n:], attach[n:], frags); cap(c.body)-len(c.body) < need {
		// Room for the new messages at once, doubling: append alone grows a large
		// slice by a quarter, copying the buffer again for each message.
		c.body = append(make([]byte, 0, max(2*cap(c.body), len(c.body)+need)), c.body...)
	}
	for i := n; i < len(msgs); i++ {
		start := len(c.body)
		if i > 0 {
			c.body = append(c.body, ',')
		}
		m := chatMessage{Message: msgs[i]}
		j := attach[i]
		if j >= 0 {
			m.tokens = frags[j].b
		}
		b, err := m.appendJSON(c.body)
		if err != nil {
			c.body = c.body[:start]
			return nil, err
		}
		c.body = b
		if j >= 0 {
			// The call's fields are in the buffer now, before the message's '}': the
			// Session keeps them there rather than twice.
			end := len(b) - 1
			frags[j].b = b[end-len(m.tokens) : end : end]
		}
		msg := msgs[i]
		msg.ToolCalls = slices.Clone(msg.ToolCalls) // the caller may reuse its slice
		c.msgs = append(c.msgs, msg)
		c.frag = append(c.frag, attach[i])
		c.ends = append(c.ends, len(c.body))
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	end := c.ends[len(msgs)-1]
	return c.body[:end:end], nil
}

// bodyGrowth is about how many bytes msgs take written, each with the token fields
// of the call attach gives it (or none).
func bodyGrowth(msgs []chat.Message, attach []int, frags []tokenFrag) int {
	n := 0
	for i := range msgs {
		m := &msgs[i]
		n += 64 + len(m.Content) + len(m.ReasoningContent) + len(m.ToolCallID) + len(m.Name)
		for _, tc := range m.ToolCalls {
			n += 64 + len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)
		}
		if attach[i] >= 0 {
			n += len(frags[attach[i]].b)
		}
	}
	return n + n/8 // escapes
}

// sameMessage reports whether a and b are the same message.
func sameMessage(a, b *chat.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && a.Name == b.Name &&
		a.ReasoningContent == b.ReasoningContent && slices.Equal(a.ToolCalls, b.ToolCalls)
}

// chatMessage is a chat message with the optional token fields, as JSON members.
type chatMessage struct {
	chat.Message
	tokens []byte
}

// appendJSON appends the message object with its token fields merged in.
func (m chatMessage) appendJSON(b []byte) ([]byte, error) {
	msg, err := json.Marshal(m.Message)
	if err != nil {
		return nil, err
	}
	if m.tokens == nil {
		return append(b, msg...), nil
	}
	b = append(b, msg[:len(msg)-1]...)
	if len(msg) > 2 {
		b = append(b, ',')
	}
	b = append(b, m.tokens...)
	return append(b, '}'), nil
}

// requestBody is a request body in pieces, sent one after the other.
type requestBody [][]byte

// Len returns the body's length in bytes.
func (r requestBody) Len() int {
	n := 0
	for _, b := range r {
		n += len(b)
	}
	return n
}

// Bytes returns the body in one slice.
func (r requestBody) Bytes() []byte { return slices.Concat(r...) }

// reader returns a reader of the body from its start.
func (r requestBody) reader() io.ReadCloser {
	bufs := net.Buffers(slices.Clone(r))
	return io.NopCloser(&bufs)
}

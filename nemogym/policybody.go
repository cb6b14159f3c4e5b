package nemogym

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// A rollout's request bodies grow with it: every call sends the whole conversation,
// each earlier assistant turn with its call's token fields, the prompt ids of which
// hold every earlier prompt and generation. Most of each body is the body of the call
// before. So the Session writes every token id of the rollout once, as list elements
// in pieces that form one list that only grows, in the order the calls' prompts and
// generations hold them: the first call's prompt, its generation, then each later
// call's new prompt ids and its generation. A call's prompt ids are a prefix of that
// list and its generation ids the piece after (the prompt extends the previous call's
// prompt and generation, which Generate checks). The Session writes each message once
// too, and keeps the body up to the last message as a list of pieces that only grows:
// the messages' own bytes and, for each assistant message, its call's ids and
// logprobs where they were written. A body is a prefix of that list and the request's
// other keys, sent piece after piece without being copied into one slice. The bytes
// sent are those the body would be written as from scratch.

// tokenFields is one call's token fields, the JSON object members
//
//	"prompt_token_ids":[<prompt>],"generation_token_ids":[<gen>]<lps>
//
// in pieces: prompt (a prefix of the Session's list of ids) and gen are the ids as
// list elements; lps is `],"generation_log_probs":[…]`, the call's own.
type tokenFields struct {
	prompt   [][]byte
	gen, lps []byte
}

// Around the pieces of a call's token fields.
const (
	promptIDsKey = `"prompt_token_ids":[`
	genIDsKey    = `],"generation_token_ids":[`
	logprobsKey  = `],"generation_log_probs":`
)

// logprobMembers writes a call's generation logprobs with the key before them, as
// tokenFields.lps.
func logprobMembers(lps []float32) ([]byte, error) {
	b := append(make([]byte, 0, len(logprobsKey)+2+12*len(lps)), logprobsKey...)
	return appendFloats(b, lps)
}

// appendIDPieces writes the ids of t's prompt past the held ones, and those of its
// generation, as two pieces appended to list, which holds the held ids: those of the
// previous call's prompt and generation, which t's prompt begins with, or none. It
// returns list, t's prompt ids (a prefix of list) and its generation ids, as list
// elements. The pieces hold a comma before every id but the list's first. Neither
// the pieces of list below its length nor their bytes are ever written again:
// earlier calls' fields hold them.
func appendIDPieces(list [][]byte, held int, t TokenInfo) (out, prompt [][]byte, gen []byte) {
	fresh := t.PromptTokenIDs[held:]
	b := make([]byte, 0, 64+7*(len(fresh)+len(t.GenerationTokenIDs)))
	b = appendIDs(b, fresh)
	n := len(b)
	b = appendIDs(b, t.GenerationTokenIDs)
	p, g := b[:n:n], b[n:len(b):len(b)]
	gen = dropComma(g)
	if held == 0 { // the list's first id goes without a comma
		if n > 0 {
			p = dropComma(p)
		} else {
			g = gen
		}
	}
	list = append(list, p, g)
	k := len(list) - 1
	return list, list[:k:k], gen
}

// appendIDs appends ids, each with a comma before it.
func appendIDs(b []byte, ids []int32) []byte {
	if len(ids) == 0 {
		return b
	}
	l := len(b)
	b = jsonscan.AppendInt32s(b, ids) // "[…]"
	b[l] = ','
	return b[:len(b)-1]
}

// dropComma returns ids, list elements each with a comma before it, without the
// first comma.
func dropComma(ids []byte) []byte {
	if len(ids) == 0 {
		return nil
	}
	return ids[1:]
}

// msgCache is the start of a Session's request bodies, `{"messages":[` and the
// messages written as JSON, each with the token fields of the call it is attached to
// (see messages), separated by commas, in pieces: msgs[i] (a copy) was written with
// frag[i] (a call, or -1) and ends with pieces[ends[i]-1]. The messages' own bytes
// are in buf, which is only appended to, or in a buffer before it; the token fields
// are where the Session wrote them. Neither the bytes that pieces hold nor the pieces
// below len(pieces) are ever written again: bodies sent earlier hold them.
type msgCache struct {
	msgs   []chat.Message
	frag   []int
	ends   []int
	pieces [][]byte
	buf    []byte
	open   int // where in buf the piece being written begins
}

// messages returns the body up to the end of msgs' last message as pieces:
// `{"messages":[` and msgs as the "messages" list's elements, each assistant message
// with its call's token fields (frags in call order go to the last len(frags)
// assistant messages, in order). The messages that begin msgs as they began the
// previous call's, with the same token fields, are not written again.
func (c *msgCache) messages(msgs []chat.Message, frags []tokenFields) ([][]byte, error) {
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
	if c.pieces == nil {
		c.writeString(`{"messages":[`)
		c.closePiece()
	}
	n := 0
	for n < len(msgs) && n < len(c.msgs) && c.frag[n] == attach[n] && sameMessage(&c.msgs[n], &msgs[n]) {
		n++
	}
	if n < len(msgs) && n < len(c.msgs) {
		// The conversation differs from the cached one at n: a new list of pieces
		// from there, since earlier bodies hold the old one's.
		keep := 1
		if n > 0 {
			keep = c.ends[n-1]
		}
		c.pieces = append(make([][]byte, 0, 2*keep), c.pieces[:keep]...)
		c.msgs, c.frag, c.ends = c.msgs[:n], c.frag[:n], c.ends[:n]
	}
	for i := n; i < len(msgs); i++ {
		m, err := json.Marshal(msgs[i])
		if err != nil {
			return nil, err
		}
		if i > 0 {
			c.writeString(",")
		}
		if j := attach[i]; j < 0 {
			c.write(m)
		} else {
			// the token fields merged into the message object, before its '}'
			c.write(m[:len(m)-1])
			if len(m) > 2 {
				c.writeString(",")
			}
			f := frags[j]
			c.writeString(promptIDsKey)
			for _, p := range f.prompt {
				c.add(p)
			}
			c.writeString(genIDsKey)
			c.add(f.gen)
			c.add(f.lps)
			c.writeString("}")
		}
		c.closePiece()
		msg := msgs[i]
		msg.ToolCalls = slices.Clone(msg.ToolCalls) // the caller may reuse its slice
		c.msgs = append(c.msgs, msg)
		c.frag = append(c.frag, attach[i])
		c.ends = append(c.ends, len(c.pieces))
	}
	end := 1
	if len(msgs) > 0 {
		end = c.ends[len(msgs)-1]
	}
	return c.pieces[:end:end], nil
}

// writeString appends s to the piece being written, in buf.
func (c *msgCache) writeString(s string) {
	c.room(len(s))
	c.buf = append(c.buf, s...)
}

// write appends b to the piece being written, in buf.
func (c *msgCache) write(b []byte) {
	c.room(len(b))
	c.buf = append(c.buf, b...)
}

// room makes room for n more bytes in buf. When buf has none, the piece being
// written ends there and the rest goes to a new buffer, twice as large: the pieces
// hold the old one's bytes.
func (c *msgCache) room(n int) {
	if cap(c.buf)-len(c.buf) < n {
		c.closePiece()
		c.buf, c.open = make([]byte, 0, max(2*cap(c.buf), n, 4096)), 0
	}
}

// closePiece ends the piece being written, if it holds any bytes.
func (c *msgCache) closePiece() {
	if end := len(c.buf); end > c.open {
		c.pieces = append(c.pieces, c.buf[c.open:end:end])
		c.open = end
	}
}

// add ends the piece being written and adds b, which is never written again, as a
// piece of its own.
func (c *msgCache) add(b []byte) {
	c.closePiece()
	if len(b) > 0 {
		c.pieces = append(c.pieces, b)
	}
}

// sameMessage reports whether a and b are the same message.
func sameMessage(a, b *chat.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && a.Name == b.Name &&
		a.ReasoningContent == b.ReasoningContent && slices.Equal(a.ToolCalls, b.ToolCalls)
}

// requestBody is a request body in pieces, sent one after the other: the start
// from the Session's cache, up to the last message, and the call's own rest.
type requestBody struct {
	head [][]byte // never written to: later bodies share it
	tail []byte
}

// Len returns the body's length in bytes.
func (r requestBody) Len() int {
	n := len(r.tail)
	for _, b := range r.head {
		n += len(b)
	}
	return n
}

// Bytes returns the body in one slice.
func (r requestBody) Bytes() []byte { return append(slices.Concat(r.head...), r.tail...) }

// reader returns a reader of the body from its start.
func (r requestBody) reader() io.ReadCloser { return &bodyReader{body: r} }

// bodyReader reads a requestBody without changing it, so that every attempt of a
// call reads the same pieces.
type bodyReader struct {
	body requestBody
	i    int // the piece being read: head[i], or tail when i is len(head)
	off  int // where in it
}

func (r *bodyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		var piece []byte
		switch {
		case r.i < len(r.body.head):
			piece = r.body.head[r.i]
		case r.i == len(r.body.head):
			piece = r.body.tail
		default:
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		k := copy(p[n:], piece[r.off:])
		n += k
		r.off += k
		if r.off == len(piece) {
			r.i, r.off = r.i+1, 0
		}
	}
	return n, nil
}

func (r *bodyReader) Close() error { return nil }

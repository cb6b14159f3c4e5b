package nemogym

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
)

// A call's token fields written from the previous call's are those written from
// scratch, whichever of the prompt, the generation and the new tokens are empty, and
// so are those of a call recorded after another call made meanwhile.
func TestTokenFieldsLikeReference(t *testing.T) {
	ids := func(from, n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(from + i*37)
		}
		return out
	}
	big := []int32{0, 7, 99999999, 100000000, 2147483647, -5, -2147483648}
	for _, lens := range [][3]int{{0, 0, 0}, {0, 3, 0}, {3, 0, 0}, {0, 0, 4}, {3, 2, 0}, {3, 0, 4}, {0, 2, 4}, {5, 4, 6}, {1, 1, 1}} {
		var prompt []int32
		prompt = append(prompt, ids(10, lens[0])...)
		prev := TokenInfo{PromptTokenIDs: slices.Clone(prompt), GenerationTokenIDs: ids(500, lens[1]), GenerationLogProbs: make([]float32, lens[1])}
		prompt = append(append(prompt, prev.GenerationTokenIDs...), ids(90000, lens[2])...)
		prompt = append(prompt, big...)
		next := TokenInfo{PromptTokenIDs: prompt, GenerationTokenIDs: ids(3, 2), GenerationLogProbs: []float32{-0.5, -9999}}
		after := TokenInfo{PromptTokenIDs: slices.Concat(prev.PromptTokenIDs, prev.GenerationTokenIDs, ids(7, 3)), GenerationTokenIDs: ids(11, 4), GenerationLogProbs: []float32{-1, -2, -3, -4}}
		last := TokenInfo{PromptTokenIDs: slices.Concat(after.PromptTokenIDs, after.GenerationTokenIDs), GenerationTokenIDs: ids(13, 1), GenerationLogProbs: []float32{-0.125}}
		s := NewSession(Sampling{})
		// after extends prev, made beside next and recorded after it
		for i, call := range []struct {
			info  TokenInfo
			after int
		}{{prev, 0}, {next, 1}, {after, 1}, {last, 3}} {
			require.NoError(t, s.record(call.info, call.after))
			want, err := refTokenMembers(call.info)
			require.NoError(t, err)
			got := s.frags[i]
			require.Equal(t, string(want), string(got.bytes()), "%v, call %d", lens, i+1)
			require.Equal(t, string(jsonList(call.info.PromptTokenIDs)), "["+string(slices.Concat(got.prompt...))+"]")
			require.Equal(t, string(jsonList(call.info.GenerationTokenIDs)), "["+string(got.gen)+"]")
		}
		for i, call := range []TokenInfo{prev, next, after, last} {
			want, err := refTokenMembers(call)
			require.NoError(t, err)
			require.Equal(t, string(want), string(s.frags[i].bytes()), "%v, call %d after the later calls", lens, i+1)
		}
	}
	s := NewSession(Sampling{})
	err := s.record(TokenInfo{GenerationTokenIDs: []int32{1}, GenerationLogProbs: []float32{float32(nan())}}, 0)
	require.ErrorIs(t, err, errNotFinite)
	require.Empty(t, s.Calls())
}

// bytes returns the token fields in one slice.
func (f tokenFields) bytes() []byte {
	return slices.Concat([]byte(promptIDsKey), slices.Concat(f.prompt...), []byte(genIDsKey), f.gen, f.lps)
}

func jsonList(ids []int32) []byte {
	b, _ := json.Marshal(ids)
	if ids == nil {
		return []byte("[]")
	}
	return b
}

func nan() float64 { var z float64; return z / z }

// bodyChecker runs a session's calls both ways: with the Session's cache (as
// Generate does) and from scratch as before (refWithTokens, refBody), and requires
// the same bytes; it keeps every body sent, to check at the end that later calls did
// not change the bytes of earlier ones.
type bodyChecker struct {
	t       *testing.T
	p       *Policy
	s       *Session
	refFrag [][]byte
	infos   []TokenInfo
	sent    []requestBody
	want    [][]byte
	tools   []chat.Tool
	kwargs  map[string]any
}

func newBodyChecker(t *testing.T, tools []chat.Tool, kwargs map[string]any) *bodyChecker {
	return &bodyChecker{t: t, p: &Policy{cfg: PolicyConfig{Model: "m"}}, s: NewSession(Sampling{}), tools: tools, kwargs: kwargs}
}

// call sends msgs, then records the call's token fields (info's prompt must extend
// the previous call's prompt and generation).
func (c *bodyChecker) call(msgs []chat.Message, info *TokenInfo) {
	t := c.t
	t.Helper()
	req := rollout.GenerateRequest{MaxTokens: 64, Sampling: sampling.Neutral(0.7)}
	refMsgs, refErr := refWithTokens(msgs, c.refFrag)
	encoded, err := c.s.enc.messages(msgs, c.s.frags)
	if refErr != nil {
		require.EqualError(t, err, refErr.Error())
		return
	}
	require.NoError(t, err)
	body, err := c.p.body(req, Sampling{}, encoded, c.tools, c.kwargs)
	require.NoError(t, err)
	want, err := c.p.refBody(req, Sampling{}, refMsgs, c.tools, c.kwargs)
	require.NoError(t, err)
	require.Equal(t, string(want), string(body.Bytes()), "call %d", len(c.infos)+1)
	require.Equal(t, len(want), body.Len())
	read, err := io.ReadAll(body.reader())
	require.NoError(t, err)
	require.Equal(t, want, read)
	c.sent, c.want = append(c.sent, body), append(c.want, want)
	if info == nil {
		return
	}
	require.NoError(t, c.s.record(*info, len(c.infos)))
	ref, err := refTokenMembers(*info)
	require.NoError(t, err)
	require.Equal(t, string(ref), string(c.s.frags[len(c.infos)].bytes()))
	c.refFrag = append(c.refFrag, ref)
	c.infos = append(c.infos, *info)
}

func (c *bodyChecker) done() {
	for i, body := range c.sent {
		require.Equal(c.t, string(c.want[i]), string(body.Bytes()), "body %d after the later calls", i+1)
	}
	for j, f := range c.s.frags {
		require.Equal(c.t, string(c.refFrag[j]), string(f.bytes()), "call %d's token fields", j+1)
	}
}

func TestBodiesLikeReference(t *testing.T) {
	t.Run("rollout", func(t *testing.T) {
		steps, bundles := policyRollout(6, 50, 20, 10)
		c := newBodyChecker(t, nil, nil)
		for i, st := range steps {
			c.call(st.msgs, &bundles[i])
		}
		c.done()
	})

	// a conversation that begins with an assistant message of its own, characters
	// that JSON escapes, reasoning, tools and template kwargs
	t.Run("escapes, tools, an earlier assistant message", func(t *testing.T) {
		tools := []chat.Tool{}
		for _, tl := range rollout.DefaultTools() {
			tools = append(tools, tl.Definition())
		}
		c := newBodyChecker(t, tools, map[string]any{"enable_thinking": true})
		msgs := []chat.Message{
			{Role: chat.RoleSystem, Content: "<sys> & \"quotes\" \u2028 é \x01"},
			{Role: chat.RoleUser, Content: "example"},
			{Role: chat.RoleAssistant, Content: "an example answer"},
			{Role: chat.RoleUser, Content: "the task </tool_call>"},
		}
		var tokens []int32
		infoFor := func(prompt, gen int) *TokenInfo {
			for i := range prompt {
				tokens = append(tokens, int32(len(tokens)*13+i))
			}
			start := len(tokens)
			for range gen {
				tokens = append(tokens, int32(len(tokens)*7))
			}
			lps := make([]float32, gen)
			for i := range lps {
				lps[i] = -float32(i) / 3
			}
			return &TokenInfo{PromptTokenIDs: tokens[:start:start], GenerationTokenIDs: tokens[start:len(tokens):len(tokens)], GenerationLogProbs: lps}
		}
		for k := range 4 {
			c.call(msgs, infoFor(5, 3))
			id := fmt.Sprintf("call_%d", k)
			msgs = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: "<b>", ReasoningContent: "hmm & so",
				ToolCalls: []chat.ToolCall{{ID: id, Type: "function", Function: chat.FunctionCall{Name: "terminal", Arguments: `{"command":"echo '<&>'"}`}}}},
				chat.Message{Role: chat.RoleTool, ToolCallID: id, Name: "terminal", Content: "out\n<&>"})
		}
		c.done()
	})

	// the conversation changes behind the cache: a message replaced, a tool call's
	// arguments changed in the caller's own slice, messages dropped
	t.Run("changed conversations", func(t *testing.T) {
		steps, bundles := policyRollout(8, 40, 10, 6)
		c := newBodyChecker(t, nil, nil)
		for i := range 3 {
			c.call(steps[i].msgs, &bundles[i])
		}
		msgs := slices.Clone(steps[3].msgs)
		msgs[4].Content = "a different tool result" // not seen before
		c.call(msgs, nil)
		c.call(steps[3].msgs, nil) // back as it was
		msgs = slices.Clone(steps[3].msgs)
		calls := slices.Clone(msgs[2].ToolCalls)
		msgs[2].ToolCalls, msgs[2].Content = calls, "changed"
		c.call(msgs, nil)
		calls[0].Function.Arguments = `{"command":"pwd"}` // in place, in the slice sent before
		c.call(msgs, nil)
		c.call(steps[3].msgs[:3], nil) // fewer messages
		c.call(steps[3].msgs[:5], nil)
		c.call(steps[1].msgs[:2], nil) // fewer assistant messages than calls: refused
		c.call(steps[3].msgs, &bundles[3])
		c.call(steps[4].msgs, &bundles[4])
		c.done()
	})
}

// The body goes out with a Content-Length, as one in a single slice did, and as
// written from scratch; a second call replays the first's token fields.
func TestPolicySendsTheReferenceBody(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.ContentLength != int64(len(body)) || len(r.TransferEncoding) > 0 {
			http.Error(w, fmt.Sprintf("body of %d bytes, Content-Length %d, Transfer-Encoding %v, %v", len(body), r.ContentLength, r.TransferEncoding, err), 400)
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		prompt := `[1,2]`
		if n == 2 {
			prompt = `[1,2,7,8,3]`
		}
		_, _ = fmt.Fprintf(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok",
			"prompt_token_ids":%s,"generation_token_ids":[7,8],"generation_log_probs":[-0.5,-0.25]}}]}`, prompt)
	}))
	defer hs.Close()
	p := &Policy{cfg: PolicyConfig{ModelURL: hs.URL, HTTPClient: hs.Client(), Tools: []chat.Tool{}}}
	s := NewSession(Sampling{})
	ctx := WithSession(context.Background(), s)
	msgs := []chat.Message{{Role: chat.RoleUser, Content: "x"}}
	req := rollout.GenerateRequest{Prompt: []int32{1, 2}, MaxTokens: 8, Sampling: sampling.Neutral(1), Messages: msgs}
	_, err := p.Generate(ctx, req)
	require.NoError(t, err)
	req.Messages = append(msgs, chat.Message{Role: chat.RoleAssistant, Content: "ok"}, chat.Message{Role: chat.RoleUser, Content: "y"})
	req.Prompt = []int32{1, 2, 7, 8, 3}
	_, err = p.Generate(ctx, req)
	require.NoError(t, err)
	require.Len(t, bodies, 2)

	first := TokenInfo{PromptTokenIDs: []int32{1, 2}, GenerationTokenIDs: []int32{7, 8}, GenerationLogProbs: []float32{-0.5, -0.25}}
	frag, err := refTokenMembers(first)
	require.NoError(t, err)
	for i, frags := range [][][]byte{nil, {frag}} {
		m := msgs
		if i == 1 {
			m = req.Messages
		}
		refMsgs, err := refWithTokens(m, frags)
		require.NoError(t, err)
		want, err := p.refBody(rollout.GenerateRequest{MaxTokens: 8, Sampling: sampling.Neutral(1)}, Sampling{}, refMsgs, []chat.Tool{}, nil)
		require.NoError(t, err)
		require.Equal(t, string(want), string(bodies[i]), "call %d", i+1)
	}
	require.True(t, bytes.Contains(bodies[1], []byte(`"content":"ok","prompt_token_ids":[1,2],"generation_token_ids":[7,8],"generation_log_probs":[-0.5,-0.25]}`)))
	require.True(t, strings.HasPrefix(string(bodies[1]), `{"messages":[`))
}

// The keys after the messages are those encoding/json writes from a map of them,
// whatever the sampling, the row's overrides, the seed, the tools and the template
// kwargs; sampling that JSON cannot carry is refused, as it was.
func TestBodyKeysLikeReference(t *testing.T) {
	temp, topP, seed, negSeed := 0.35, 1e-7, int64(42), int64(-7)
	var tools []chat.Tool
	for _, tl := range rollout.DefaultTools() {
		tools = append(tools, tl.Definition())
	}
	for _, tc := range []struct {
		name   string
		model  string
		req    rollout.GenerateRequest
		row    Sampling
		tools  []chat.Tool
		kwargs map[string]any
	}{
		{name: "neutral", req: rollout.GenerateRequest{MaxTokens: 64, Sampling: sampling.Neutral(1)}},
		{name: "every field", model: "Qwen/Qwen3-8B",
			req: rollout.GenerateRequest{MaxTokens: 4096, Seed: &seed, Sampling: sampling.Params{Temperature: 0.6, TopP: 0.95, TopK: 20,
				MinP: 0.05, RepetitionPenalty: 1.1, PresencePenalty: -1.5, FrequencyPenalty: 2}}},
		{name: "the row's sampling", req: rollout.GenerateRequest{MaxTokens: 4096, Seed: &negSeed, Sampling: sampling.Params{Temperature: 1}},
			row: Sampling{Temperature: &temp, TopP: &topP, MaxOutputTokens: 100}},
		{name: "exponents and tiny values", model: "<m&>\u2028",
			req: rollout.GenerateRequest{MaxTokens: 0, Sampling: sampling.Params{Temperature: 1e21, TopP: 1e-6, MinP: 5e-324, RepetitionPenalty: 123456789.125, PresencePenalty: -0.0000009}}},
		{name: "tools and kwargs", req: rollout.GenerateRequest{MaxTokens: 8, Sampling: sampling.Neutral(0.7)}, tools: tools,
			kwargs: map[string]any{"enable_thinking": false, "b": []any{1.5, "<&>", nil}, "a": map[string]any{"z": 1, "y": "\"q\""}}},
		{name: "empty tools and kwargs", req: rollout.GenerateRequest{MaxTokens: 8, Sampling: sampling.Neutral(0.7)}, tools: []chat.Tool{}, kwargs: map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Policy{cfg: PolicyConfig{Model: tc.model}}
			msgs := []chat.Message{{Role: chat.RoleUser, Content: "x"}}
			refMsgs, err := refWithTokens(msgs, nil)
			require.NoError(t, err)
			want, err := p.refBody(tc.req, tc.row, refMsgs, tc.tools, tc.kwargs)
			require.NoError(t, err)
			var c msgCache
			head, err := c.messages(msgs, nil)
			require.NoError(t, err)
			got, err := p.body(tc.req, tc.row, head, tc.tools, tc.kwargs)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got.Bytes()))
		})
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		p := &Policy{}
		req := rollout.GenerateRequest{MaxTokens: 8, Sampling: sampling.Params{Temperature: 1, MinP: bad}}
		_, err := p.refBody(req, Sampling{}, nil, nil, nil)
		require.Error(t, err)
		_, err = p.body(req, Sampling{}, nil, nil, nil)
		require.Error(t, err, "MinP %v", bad)
	}
	p := &Policy{}
	_, err := p.body(rollout.GenerateRequest{MaxTokens: 8}, Sampling{}, nil, nil, map[string]any{"f": func() {}})
	require.ErrorContains(t, err, "ChatTemplateKwargs")
}

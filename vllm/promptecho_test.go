package vllm

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// sentFor encodes a one-prompt request for prompt through completionBody and returns
// what it reports as the prompt sent, after checking that those bytes are the body's
// prompt member.
func sentFor(t testing.TB, prompt []int32, extra map[string]any) *sentPrompt {
	t.Helper()
	c, err := NewClient("http://127.0.0.1:1")
	require.NoError(t, err)
	body, sent, err := c.completionBody(t.Context(), CompletionRequest{Model: "m", Prompts: [][]int32{prompt}, Extra: extra})
	require.NoError(t, err)
	require.NotNil(t, sent)
	var member struct {
		Prompt json.RawMessage `json:"prompt"`
	}
	require.NoError(t, json.Unmarshal(body, &member))
	require.Equal(t, string(member.Prompt), string(sent.json))
	require.Equal(t, prompt, sent.ids)
	return sent
}

// echoLikeParsed checks that decoding a choice whose prompt_token_ids member is echo,
// knowing the prompt sent, gives what decoding it without that knowledge gives, and
// fails exactly when that fails.
func echoLikeParsed(t *testing.T, sent *sentPrompt, echo string) {
	t.Helper()
	body := []byte(`{"choices":[{"index":0,"prompt_token_ids":` + echo + `,"text":"x"}]}`)
	want, wantErr := decodeCompletion(&jsonscan.Scanner{Data: body}, decodeNoTopLogprobs, nil)
	got, err := decodeCompletion(&jsonscan.Scanner{Data: body}, decodeNoTopLogprobs, sent)
	if wantErr != nil {
		require.Error(t, err, "%q: the parsing decoder refuses it (%v)", echo, wantErr)
		return
	}
	require.NoError(t, err, echo)
	require.Equal(t, want, got, echo)
}

func TestPromptEchoLikeParsed(t *testing.T) {
	prompt := []int32{151644, 0, 7, 42, 151645}
	for _, extra := range []map[string]any{nil, {"x": 1}} {
		sent := sentFor(t, prompt, extra)
		for _, echo := range []string{
			`[151644,0,7,42,151645]`,
			` [151644,0,7,42,151645] `,
			`[151644, 0, 7, 42, 151645]`,
			`[151644,0,7,42,151645,1]`,
			`[151644,0,7,42,1516450]`,
			`[151644,0,7,42]`,
			`[151644,0,7,42,151645]]`,
			`[151644,0,7,42,151645]x`,
			`[151644,0,7,42,151645`,
			`[151644,0,7,42,151645.0]`,
			`null`,
			`[]`,
		} {
			echoLikeParsed(t, sent, echo)
		}
	}
}

// TestPromptEchoCopies checks that the ids of an echo read without parsing are a copy
// of the prompt, not the caller's slice.
func TestPromptEchoCopies(t *testing.T) {
	prompt := []int32{3, 1, 4}
	sent := sentFor(t, prompt, nil)
	ids, ok := sent.echo(&jsonscan.Scanner{Data: []byte(` [3,1,4]`)})
	require.True(t, ok, "an exact echo is read without parsing")
	require.Equal(t, prompt, ids)
	body := []byte(`{"choices":[{"index":0,"prompt_token_ids":[3,1,4]}]}`)
	resp, err := decodeCompletion(&jsonscan.Scanner{Data: body}, decodeAll, sent)
	require.NoError(t, err)
	got := resp.Choices[0].PromptTokenIDs
	require.Equal(t, prompt, got)
	got[0] = 9
	require.Equal(t, int32(3), prompt[0])
}

// FuzzPromptEchoLikeParsed checks echoLikeParsed on any echo of any prompt.
func FuzzPromptEchoLikeParsed(f *testing.F) {
	f.Add([]byte{1, 2, 3}, `[1,2,3]`)
	f.Add([]byte{0}, `[0] `)
	f.Add([]byte{200}, `[200,1]`)
	f.Fuzz(func(t *testing.T, ids []byte, echo string) {
		if len(ids) == 0 {
			return
		}
		prompt := make([]int32, len(ids))
		for i, b := range ids {
			prompt[i] = int32(b) * 1000
		}
		echoLikeParsed(t, sentFor(t, prompt, nil), echo)
	})
}

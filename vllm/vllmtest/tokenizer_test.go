package vllmtest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestTokenizeDetokenizeRoundTrip(t *testing.T) {
	s := vllmtest.NewServer(t)
	tests := []struct {
		name string
		text string
	}{
		{"english", "The tests pass now, and the function handles empty lists."},
		{"python", "def f(x):\n    return [i * 2 for i in x if i % 2 == 0]\n"},
		{"json", `{"name": "write_file", "arguments": {"path": "a.py"}}`},
		{"unicode", "naïve café — 日本語 🙂"},
		{"special literals", "<|im_start|>user\nhi<|im_end|>\n<tool_call>\n{}\n</tool_call>"},
		{"whitespace", "a  b\t\tc\n\n\n   d   "},
		{"invalid utf8", "a\xffb\xc3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// JSON carries invalid UTF-8 as U+FFFD
			sent := strings.ToValidUTF8(tt.text, "\uFFFD")
			var tok tokenizeResponse
			postOK(t, s.URL+"/tokenize", map[string]any{"prompt": tt.text}, &tok)
			require.Equal(t, len(tok.Tokens), tok.Count)
			require.Equal(t, vllmtest.DefaultMaxModelLen, tok.MaxModelLen)
			require.Nil(t, tok.TokenStrs)
			if diff := cmp.Diff(s.Tokenize(sent), tok.Tokens); diff != "" {
				t.Errorf("HTTP and in-process tokenization differ (-want +got):\n%s", diff)
			}
			var det struct {
				Prompt string `json:"prompt"`
			}
			postOK(t, s.URL+"/detokenize", map[string]any{"tokens": tok.Tokens}, &det)
			require.Equal(t, sent, det.Prompt)
			require.Equal(t, tt.text, s.Decode(s.Tokenize(tt.text)))
		})
	}
}

func TestTokenizerHasMultiCharacterTokens(t *testing.T) {
	s := vllmtest.NewServer(t)
	text := "def sum_even(numbers):\n    return sum(n for n in numbers if n % 2 == 0)\n"
	ids := s.Tokenize(text)
	require.Less(t, len(ids), len(text)/2, "BPE should compress code well below one token per two bytes")
	require.Greater(t, s.VocabSize(), 600)
	require.Less(t, s.VocabSize(), 4000)
}

func TestSpecialTokensAreSingleIDs(t *testing.T) {
	s := vllmtest.NewServer(t)
	tests := []struct {
		literal string
		id      int32
	}{
		{"<|endoftext|>", vllmtest.EndOfText},
		{"<|im_start|>", vllmtest.ImStart},
		{"<|im_end|>", vllmtest.ImEnd},
		{"<tool_call>", vllmtest.ToolCall},
		{"</tool_call>", vllmtest.ToolCallEnd},
		{"<tool_response>", vllmtest.ToolResponse},
		{"</tool_response>", vllmtest.ToolResponseEnd},
		{"<think>", vllmtest.Think},
		{"</think>", vllmtest.ThinkEnd},
	}
	for _, tt := range tests {
		t.Run(tt.literal, func(t *testing.T) {
			require.Equal(t, []int32{tt.id}, s.Tokenize(tt.literal))
			ids := s.Tokenize("x" + tt.literal + "y")
			require.Contains(t, ids, tt.id)
			require.Equal(t, "x"+tt.literal+"y", s.Decode(ids))
		})
	}
	// no merge ever produces a special id from ordinary text
	ids := s.Tokenize("<|im_start <tool_call <think> </thinking>")
	require.Equal(t, 1, countOf(ids, vllmtest.Think))
	require.Equal(t, 0, countOf(ids, vllmtest.ImStart)+countOf(ids, vllmtest.ToolCall)+countOf(ids, vllmtest.ThinkEnd))
}

func countOf(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// Merges cross the boundary between two strings: tokenizing the concatenation differs
// from concatenating the tokenizations, as with real BPE vocabularies.
func TestMergesCrossBoundaries(t *testing.T) {
	s := vllmtest.NewServer(t)
	pairs := [][2]string{
		{"\n", "\n"},
		{"ass", "istant"},
		{"def", "ault"},
		{" te", "sts"},
		{"return", "s"},
	}
	crossing := 0
	for _, p := range pairs {
		joined := s.Tokenize(p[0] + p[1])
		apart := append(s.Tokenize(p[0]), s.Tokenize(p[1])...)
		require.Equal(t, s.Decode(joined), s.Decode(apart))
		if !slices.Equal(joined, apart) {
			crossing++
		}
	}
	require.GreaterOrEqual(t, crossing, 3, "most of these pairs should merge across the boundary")
	require.Len(t, s.Tokenize("\n\n"), 1, `"\n\n" is one token, as in Qwen's vocabulary`)
}

func TestTokenStrs(t *testing.T) {
	s := vllmtest.NewServer(t)
	var tok tokenizeResponse
	postOK(t, s.URL+"/tokenize", map[string]any{"prompt": "hello world", "return_token_strs": true}, &tok)
	require.Len(t, tok.TokenStrs, len(tok.Tokens))
	joined := ""
	for _, p := range tok.TokenStrs {
		joined += p
	}
	require.Equal(t, "hello world", joined)
}

func FuzzTokenizeRoundTrip(f *testing.F) {
	s, err := vllmtest.Start()
	require.NoError(f, err)
	defer s.Close()
	for _, seed := range []string{"", "hello world", "<|im_end|>\n\n", "def f():\n\treturn 1", "\xff\xfe", "日本"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		ids := s.Tokenize(text)
		if got := s.Decode(ids); got != text {
			t.Fatalf("Decode(Tokenize(%q)) = %q", text, got)
		}
		for _, id := range ids {
			if id < 0 || int(id) >= s.VocabSize() {
				t.Fatalf("id %d outside the vocabulary", id)
			}
		}
	})
}

package vllmtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// callCacheLikeParse checks that a callCache gives what parseToolCalls gives, before
// and after it remembers text, and that changing the calls it returned leaves later
// answers alone.
func callCacheLikeParse(t *testing.T, text string) {
	var cc callCache
	wantContent, wantCalls, wantOK := parseToolCalls(text, "call_")
	for range 2 {
		content, calls, ok := cc.parse(text)
		require.Equal(t, wantOK, ok, text)
		require.Equal(t, wantContent, content, text)
		require.Equal(t, wantCalls, calls, text)
		for i := range calls {
			calls[i].ID = "changed"
		}
	}
	content, calls, ok := (*callCache)(nil).parse(text)
	require.Equal(t, []any{wantContent, wantCalls, wantOK}, []any{content, calls, ok}, text)
}

func TestCallCacheLikeParse(t *testing.T) {
	for _, text := range []string{
		"",
		"no calls",
		"Step 1.\n<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>",
		"<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n</tool_call>",
		"<tool_call>{\"name\": \"a\"}</tool_call>",
		"<tool_call>not json",
	} {
		callCacheLikeParse(t, text)
	}
}

func FuzzCallCacheLikeParse(f *testing.F) {
	f.Add("<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>")
	f.Fuzz(callCacheLikeParse)
}

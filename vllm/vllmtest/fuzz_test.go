package vllmtest_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// FuzzRequestBodies sends arbitrary bodies to the JSON endpoints: the server answers
// 200 or a 4xx, never a 5xx or a dropped connection.
func FuzzRequestBodies(f *testing.F) {
	s, err := vllmtest.Start(vllmtest.WithMaxModelLen(2048), vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		return "ok", in.Turn%2 == 1
	}))
	require.NoError(f, err)
	defer s.Close()
	paths := []string{"/tokenize", "/detokenize", "/v1/completions", "/v1/chat/completions"}
	seeds := []string{
		`{"prompt":"hello"}`,
		`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
		`{"messages":[{"role":"assistant","content":"<think>\nx\n</think>\n\ny","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","content":"r"}]}`,
		`{"tokens":[1,2,300]}`,
		`{"prompt":[[1,2],[3]],"n":2,"prompt_logprobs":3,"logprobs":2,"max_tokens":4,"stop":["a"]}`,
		`{"prompt":"<|im_start|>user\n<tool_response>\nx\n</tool_response><|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": 1}\n</tool_call><|im_end|>\n<|im_start|>assistant\n","max_tokens":3}`,
		`{"messages":[{"role":"user","content":"x"}],"n":2,"logprobs":true,"top_logprobs":3,"max_tokens":5}`,
		`[]`, `null`, `{"prompt":-1}`,
	}
	for i, seed := range seeds {
		f.Add(uint8(i), []byte(seed))
	}
	f.Fuzz(func(t *testing.T, p uint8, body []byte) {
		resp, err := http.Post(s.URL+paths[int(p)%len(paths)], "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("request failed: %v", err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("reading answer: %v", err)
		}
		if resp.StatusCode >= 500 {
			t.Fatalf("status %d for %s: %s", resp.StatusCode, body, out)
		}
	})
}

package vllmtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// BenchmarkPromptLogprobs16k scores a 16384-token prompt with prompt_logprobs=50 over
// HTTP and reads the whole answer.
func BenchmarkPromptLogprobs16k(b *testing.B) {
	s := vllmtest.NewServer(b, vllmtest.WithMaxLogprobs(50))
	text := strings.Repeat("def add(a, b):\n    return a + b\n\nThe tests pass. ", 2000)
	prompt := s.Tokenize(text)
	require.GreaterOrEqual(b, len(prompt), 16384)
	prompt = prompt[:16384]
	body, err := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 1, "prompt_logprobs": 50})
	require.NoError(b, err)
	var n int64
	b.ResetTimer()
	for b.Loop() {
		resp, err := http.Post(s.URL+"/v1/completions", "application/json", bytes.NewReader(body))
		require.NoError(b, err)
		n, err = io.Copy(io.Discard, resp.Body)
		require.NoError(b, err)
		resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode)
	}
	b.ReportMetric(float64(n)/(1<<20), "MiB/response")
}

// BenchmarkTokenize measures prompt-form tokenization of about 64 KiB of text.
func BenchmarkTokenize(b *testing.B) {
	s := vllmtest.NewServer(b)
	text := strings.Repeat("Please write a function that merges two sorted lists; run pytest -q.\n", 1000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_ = s.Tokenize(text)
	}
}

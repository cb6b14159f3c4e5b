package vllmtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

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

// BenchmarkGenerate16k is one agent turn late in a long rollout, as the simulator
// serves it: a 16,000-token chat prompt, a scripted answer of about 300 tokens, with
// the request fields the vLLM client sends (logprobs 0 as token ids, return_token_ids,
// so the prompt is echoed). cpu-µs/op is the process's CPU time per request, the HTTP
// client's small share included.
func BenchmarkGenerate16k(b *testing.B) {
	answer := strings.Repeat("I will run the tests again and read the failure. ", 30)
	s := vllmtest.NewServer(b, vllmtest.WithAgentScript(func(vllmtest.ScriptInput) (string, bool) { return answer, true }))
	user := strings.Repeat("def add(a, b):\n    return a + b\n\nThe tests pass. ", 2000)
	prompt := s.Tokenize("<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n")
	require.GreaterOrEqual(b, len(prompt), 16000)
	prompt = append(prompt[:16000-len(s.Tokenize("<|im_end|>\n<|im_start|>assistant\n"))], s.Tokenize("<|im_end|>\n<|im_start|>assistant\n")...)
	body, err := json.Marshal(map[string]any{
		"prompt": prompt, "max_tokens": 1024, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
		"repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0,
		"logprobs": 0, "return_token_ids": true, "return_tokens_as_token_ids": true,
		"skip_special_tokens": false, "spaces_between_special_tokens": false, "model": vllmtest.DefaultModel,
	})
	require.NoError(b, err)
	resp, err := http.Post(s.URL+"/v1/completions", "application/json", bytes.NewReader(body))
	require.NoError(b, err)
	var out struct {
		Choices []struct {
			TokenIDs       []int32 `json:"token_ids"`
			PromptTokenIDs []int32 `json:"prompt_token_ids"`
		}
	}
	require.NoError(b, json.NewDecoder(resp.Body).Decode(&out))
	resp.Body.Close()
	require.Len(b, out.Choices[0].PromptTokenIDs, 16000)
	require.Greater(b, len(out.Choices[0].TokenIDs), 250, "the scripted answer")
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		resp, err := http.Post(s.URL+"/v1/completions", "application/json", bytes.NewReader(body))
		require.NoError(b, err)
		_, err = io.Copy(io.Discard, resp.Body)
		require.NoError(b, err)
		resp.Body.Close()
		require.Equal(b, http.StatusOK, resp.StatusCode)
	}
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

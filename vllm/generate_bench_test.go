package vllm_test

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/vllm"
)

// generateReply is a /v1/completions reply, as vLLM writes it, to a Generate call
// with the given prompt: gen sampled tokens with their logprobs named "token_id:N",
// the prompt echoed in prompt_token_ids.
func generateReply(prompt []int32, gen int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	ids := make([]int32, gen)
	for i := range ids {
		ids[i] = int32(rng.IntN(150000))
	}
	ids[gen-1] = 151645
	lps := make([]string, gen)
	for i := range lps {
		lps[i] = strconv.FormatFloat(float64(float32(-rng.Float64()*3)), 'g', -1, 32)
	}
	b := []byte(`{"id":"cmpl-bench","object":"text_completion","created":1730000000,"model":"m","choices":[{"index":0,"text":"x","logprobs":{"text_offset":[`)
	for i := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(i), 10)
	}
	b = append(b, `],"token_logprobs":[`...)
	for i := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, lps[i]...)
	}
	b = append(b, `],"tokens":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"token_id:`...)
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, '"')
	}
	b = append(b, `],"top_logprobs":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"token_id:`...)
		b = strconv.AppendInt(b, int64(id), 10)
		b = append(b, `":`...)
		b = append(b, lps[i]...)
		b = append(b, '}')
	}
	b = append(b, `]},"finish_reason":"stop","stop_reason":null,"token_ids":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	b = append(b, `],"prompt_logprobs":null,"prompt_token_ids":[`...)
	for i, id := range prompt {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	b = append(b, `]}],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(len(prompt)), 10)
	b = append(b, `,"total_tokens":0,"completion_tokens":0}}`...)
	return b
}

// BenchmarkGenerate16k is the client's side of one agent turn late in a long
// rollout: Generate with a 16,000-token prompt and a 300-token answer, over loopback
// HTTP to a server that only drains the request and writes a prepared reply. Its
// figures are the cost this process pays per turn whatever the server (encoding the
// prompt, decoding the echo and the logprobs, checking them); cpu-µs/op is the
// process's CPU time per call, the loopback server's small share included.
func BenchmarkGenerate16k(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := make([]int32, 16000)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(151000))
	}
	reply := generateReply(prompt, 300)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
		_, _ = w.Write(reply)
	}))
	b.Cleanup(srv.Close)
	c, err := vllm.NewClient(srv.URL, vllm.WithModel("m"))
	require.NoError(b, err)
	req := rollout.GenerateRequest{Prompt: prompt, MaxTokens: 1024, Sampling: sampling.Neutral(1)}
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		g, err := c.Generate(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		if len(g.Tokens) != 300 {
			b.Fatalf("%d tokens", len(g.Tokens))
		}
	}
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

package vllm_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm"
)

// promptLogprobsPayload builds a /v1/completions response whose one choice carries
// prompt_logprobs for positions prompt positions with k top entries each, plus the
// actual token when it ranks below k (so k or k+1 entries), as vLLM writes them.
func promptLogprobsPayload(positions, k int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 0, positions*(k+1)*70)
	buf = append(buf, `{"id":"cmpl-bench","object":"text_completion","created":1730000000,"model":"m","choices":[{"index":0,"text":"x","logprobs":null,"finish_reason":"length","stop_reason":null,"prompt_logprobs":[null`...)
	for p := 1; p < positions; p++ {
		buf = append(buf, ",{"...)
		actual := rng.IntN(151000)
		rank := 1 + rng.IntN(2*k)
		entry := func(id, rank int, lp float64) {
			buf = append(buf, '"')
			buf = strconv.AppendInt(buf, int64(id), 10)
			buf = append(buf, `":{"logprob":`...)
			if rng.IntN(500) == 0 {
				buf = append(buf, "-9999.0"...)
			} else {
				buf = strconv.AppendFloat(buf, lp, 'g', -1, 32)
			}
			buf = append(buf, `,"rank":`...)
			buf = strconv.AppendInt(buf, int64(rank), 10)
			buf = append(buf, `,"decoded_token":"`...)
			buf = append(buf, "tok"...)
			buf = strconv.AppendInt(buf, int64(id%977), 10)
			buf = append(buf, `"}`...)
		}
		lp := -rng.Float64() * 0.5
		if rank > k {
			entry(actual, rank, lp-float64(rank)) // the actual token first, as V1 does
			buf = append(buf, ',')
		}
		for r := 1; r <= k; r++ {
			id := (actual + r*7919) % 151000
			if r == rank {
				id = actual
			}
			entry(id, r, lp-float64(r)*0.37)
			if r < k {
				buf = append(buf, ',')
			}
		}
		buf = append(buf, '}')
	}
	buf = append(buf, `],"prompt_token_ids":null,"token_ids":null}],"usage":{"prompt_tokens":16384,"completion_tokens":1,"total_tokens":16385}}`...)
	return buf
}

// plainResponse is how a client without a scanner decodes the same answer.
type plainResponse struct {
	Choices []struct {
		Index          int `json:"index"`
		PromptLogprobs []map[string]struct {
			Logprob      float32 `json:"logprob"`
			Rank         *int    `json:"rank"`
			DecodedToken *string `json:"decoded_token"`
		} `json:"prompt_logprobs"`
	} `json:"choices"`
}

func TestBenchPayloadDecodesAlike(t *testing.T) {
	data := promptLogprobsPayload(64, 5)
	resp, err := vllm.DecodeCompletionResponse(data)
	require.NoError(t, err)
	var plain plainResponse
	require.NoError(t, json.Unmarshal(data, &plain))
	pl := resp.Choices[0].PromptLogprobs
	require.Equal(t, len(plain.Choices[0].PromptLogprobs), pl.Len())
	for j, m := range plain.Choices[0].PromptLogprobs {
		ids, lps, ranks := pl.Entries(j)
		require.Len(t, ids, len(m), "position %d", j)
		for e, id := range ids {
			want := m[strconv.Itoa(int(id))]
			require.Equal(t, want.Logprob, lps[e])
			require.Equal(t, int32(*want.Rank), ranks[e])
		}
	}
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecodePromptLogprobs decodes one 16384-position answer with 50 top entries
// per position (51 with the actual token) with the package's scanner and with plain
// encoding/json into maps, both in the same run, and reports how many times faster
// the scanner is. x-vs-encoding-json compares the process's CPU time over each decode
// (getrusage, after a collection that clears the other's garbage, garbage collection
// during the decode included), which time the machine gives to other processes does
// not change; x-vs-encoding-json-wall compares wall times.
func BenchmarkDecodePromptLogprobs(b *testing.B) {
	data := promptLogprobsPayload(16384, 50)
	b.SetBytes(int64(len(data)) * 2)
	b.ReportAllocs()
	var scan, plain, scanCPU, plainCPU time.Duration
	for b.Loop() {
		runtime.GC()
		c0, t0 := processCPU(), time.Now()
		resp, err := vllm.DecodeCompletionResponse(data)
		if err != nil || resp.Choices[0].PromptLogprobs.Len() != 16384 {
			b.Fatal(err)
		}
		c1, t1 := processCPU(), time.Now()
		runtime.KeepAlive(resp)
		resp = nil
		runtime.GC()
		c2, t2 := processCPU(), time.Now()
		var p plainResponse
		if err := json.Unmarshal(data, &p); err != nil || len(p.Choices[0].PromptLogprobs) != 16384 {
			b.Fatal(err)
		}
		c3, t3 := processCPU(), time.Now()
		scan += t1.Sub(t0)
		plain += t3.Sub(t2)
		scanCPU += c1 - c0
		plainCPU += c3 - c2
	}
	n := float64(b.N)
	b.ReportMetric(float64(len(data))/1e6, "payload-MB")
	b.ReportMetric(scan.Seconds()*1e3/n, "scanner-ms/op")
	b.ReportMetric(plain.Seconds()*1e3/n, "encoding-json-ms/op")
	b.ReportMetric(scanCPU.Seconds()*1e3/n, "scanner-cpu-ms/op")
	b.ReportMetric(plainCPU.Seconds()*1e3/n, "encoding-json-cpu-ms/op")
	b.ReportMetric(plainCPU.Seconds()/scanCPU.Seconds(), "x-vs-encoding-json")
	b.ReportMetric(plain.Seconds()/scan.Seconds(), "x-vs-encoding-json-wall")
}

func ExampleDecodePromptLogprobs() {
	pl, err := vllm.DecodePromptLogprobs([]byte(`[null,{"9707":{"logprob":-1.5,"rank":2,"decoded_token":"Hello"},"40":{"logprob":-0.75,"rank":1,"decoded_token":"I"},"13":{"logprob":-9999.0,"rank":151000,"decoded_token":"."}}]`))
	if err != nil {
		panic(err)
	}
	ids, lps, _ := pl.AppendTopK(1, 2, nil, nil)
	lp, rank, _ := pl.Lookup(1, 13)
	fmt.Println(ids, lps, lp, rank)
	// Output: [40 9707] [-0.75 -1.5] -9999 151000
}

// BenchmarkDecodePromptLogprobsStream reads the answer of BenchmarkDecodePromptLogprobs
// as the client reads a scoring answer, from a reader, two ways in the same run: into
// a buffer of the body's size and then decoded (how the client read it before), and
// decoded as it arrives ([vllm.DecodeCompletionStream], how it reads it now). It
// reports each one's CPU time and bytes allocated per answer (the decoded arrays are
// the same in both; the buffer is what streaming saves), and stream-cpu-ratio, the
// streaming decode's CPU time over the buffered one's.
func BenchmarkDecodePromptLogprobsStream(b *testing.B) {
	data := promptLogprobsPayload(16384, 50)
	b.SetBytes(int64(len(data)) * 2)
	var bufCPU, streamCPU time.Duration
	var bufAlloc, streamAlloc uint64
	var ms runtime.MemStats
	measure := func(cpu *time.Duration, alloc *uint64, decode func() (*vllm.CompletionResponse, error)) {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		a0, c0 := ms.TotalAlloc, processCPU()
		resp, err := decode()
		if err != nil || resp.Choices[0].PromptLogprobs.Len() != 16384 {
			b.Fatal(err)
		}
		*cpu += processCPU() - c0
		runtime.ReadMemStats(&ms)
		*alloc += ms.TotalAlloc - a0
	}
	for b.Loop() {
		measure(&bufCPU, &bufAlloc, func() (*vllm.CompletionResponse, error) {
			var buf bytes.Buffer
			buf.Grow(len(data) + bytes.MinRead) // as for an answer with a Content-Length
			if _, err := buf.ReadFrom(bytes.NewReader(data)); err != nil {
				return nil, err
			}
			return vllm.DecodeCompletionResponse(buf.Bytes())
		})
		measure(&streamCPU, &streamAlloc, func() (*vllm.CompletionResponse, error) {
			return vllm.DecodeCompletionStream(bytes.NewReader(data))
		})
	}
	n := float64(b.N)
	b.ReportMetric(float64(len(data))/1e6, "payload-MB")
	b.ReportMetric(bufCPU.Seconds()*1e3/n, "buffered-cpu-ms/op")
	b.ReportMetric(streamCPU.Seconds()*1e3/n, "stream-cpu-ms/op")
	b.ReportMetric(float64(bufAlloc)/1e6/n, "buffered-alloc-MB/op")
	b.ReportMetric(float64(streamAlloc)/1e6/n, "stream-alloc-MB/op")
	b.ReportMetric(streamCPU.Seconds()/bufCPU.Seconds(), "stream-cpu-ratio")
}

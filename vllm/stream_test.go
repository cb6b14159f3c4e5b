package vllm_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// streamReaders cut a body the ways a network does: a byte at a time, half of what
// is asked, and whole.
var streamReaders = map[string]func([]byte) io.Reader{
	"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
	"half":     func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
	"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
}

// likeMemory decodes data in memory and streamed, every way it can be cut, and
// requires the same response or the same error.
func likeMemory[T any](t testing.TB, data []byte, memory func([]byte) (T, error), stream func(io.Reader) (T, error)) {
	t.Helper()
	want, wantErr := memory(data)
	for name, r := range streamReaders {
		got, err := stream(r(data))
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("%q, %s: stream error %v, in memory %v", data, name, err, wantErr)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%q, %s: stream and memory differ (-memory +stream):\n%s", data, name, d)
		}
	}
}

func checkStreamLikeMemory(t testing.TB, data []byte) {
	t.Helper()
	likeMemory(t, data, vllm.DecodeCompletionResponse, vllm.DecodeCompletionStream)
}

func checkChatStreamLikeMemory(t testing.TB, data []byte) {
	t.Helper()
	likeMemory(t, data, vllm.DecodeChatCompletionResponse, vllm.DecodeChatCompletionStream)
}

func TestDecodeChatCompletionStreamLikeMemory(t *testing.T) {
	for _, name := range []string{"chat_completion.json", "chat_completion_prompt_logprobs.json"} {
		body := readTestdata(t, name)
		checkChatStreamLikeMemory(t, body)
		for cut := range len(body) {
			checkChatStreamLikeMemory(t, body[:cut])
		}
	}
}

func FuzzDecodeChatCompletionStream(f *testing.F) {
	for _, name := range []string{"chat_completion.json", "chat_completion_prompt_logprobs.json"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkChatStreamLikeMemory(t, data)
	})
}

func TestDecodeCompletionStreamLikeMemory(t *testing.T) {
	for _, name := range []string{"completions_batched.json", "completions_generate.json", "completions_token_id_strings.json"} {
		body := readTestdata(t, name)
		for cut := range len(body) {
			checkStreamLikeMemory(t, body[:cut])
		}
	}
	// Positions and entries longer than the 16 KiB a streaming scanner takes whole.
	long := bytes.Replace(promptLogprobsPayload(30, 5), []byte(`"decoded_token":"tok`), []byte(`"decoded_token":"`+strings.Repeat("x", 40000)+`tok`), 3)
	bodies := [][]byte{promptLogprobsPayload(300, 20), promptLogprobsPayload(40, 400), long}
	for _, name := range []string{"completions_batched.json", "completions_generate.json", "completions_token_id_strings.json"} {
		bodies = append(bodies, readTestdata(t, name))
	}
	for _, body := range bodies {
		checkStreamLikeMemory(t, body)
		// cut anywhere, and broken anywhere: the same errors
		for _, cut := range []int{0, 1, len(body) / 3, len(body) / 2, len(body) - 2, len(body) - 1} {
			checkStreamLikeMemory(t, body[:cut])
			broken := bytes.Clone(body)
			broken[cut] = '!'
			checkStreamLikeMemory(t, broken)
		}
	}
}

func FuzzDecodeCompletionStream(f *testing.F) {
	for _, name := range []string{"completions_batched.json", "completions_generate.json", "completions_token_id_strings.json"} {
		f.Add(readTestdata(f, name))
	}
	f.Add(promptLogprobsPayload(4, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkStreamLikeMemory(t, data)
	})
}

func TestDecodeCompletionStreamReadError(t *testing.T) {
	body := promptLogprobsPayload(50, 5)
	reset := errors.New("connection reset by peer")
	_, err := vllm.DecodeCompletionStream(io.MultiReader(bytes.NewReader(body[:len(body)/2]), iotest.ErrReader(reset)))
	require.ErrorIs(t, err, reset)
}

// readSizes wraps a transport and records the largest Read into each response body:
// a client that buffers a whole answer reads into a buffer of its Content-Length.
type readSizes struct {
	mu      sync.Mutex
	largest int
	total   int
}

func (z *readSizes) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		resp.Body = &sizedBody{resp.Body, z}
	}
	return resp, err
}

type sizedBody struct {
	io.ReadCloser
	z *readSizes
}

func (b *sizedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.z.mu.Lock()
	b.z.largest = max(b.z.largest, len(p))
	b.z.total += n
	b.z.mu.Unlock()
	return n, err
}

// Score reads the teacher's answer, megabytes of prompt_logprobs, through a window of
// 64 KiB rather than into a buffer of the answer's size.
func TestScoreReadsTheAnswerAsItArrives(t *testing.T) {
	s := vllmtest.NewServer(t, vllmtest.WithMaxLogprobs(50))
	z := &readSizes{}
	c := s.Client(append(fastRetry, vllm.WithHTTPClient(&http.Client{Transport: z}))...)
	tokens := longSequence(s, 2048)
	res, err := c.Score(bg, scorer.Request{K: 50, Sequences: []scorer.Sequence{{Tokens: tokens, Positions: []int{10, 1000, len(tokens) - 1}}}})
	require.NoError(t, err)
	require.Len(t, res.Sequences[0].Positions, 3)
	require.Greater(t, z.total, 4<<20, "the answer is megabytes long")
	require.LessOrEqual(t, z.largest, 64<<10, "no read into a buffer larger than the window")
}

// A connection that breaks in the middle of a scoring answer is a server failure: the
// pool sends the request to another server.
func TestPoolScoreBrokenBodyFailsOver(t *testing.T) {
	good := vllmtest.NewServer(t, vllmtest.WithMaxLogprobs(20))
	tokens := longSequence(good, 300)
	var hits int
	var mu sync.Mutex
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		hits++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		body := promptLogprobsPayload(300, 20)
		_, _ = w.Write(body[:len(body)/2])
		http.NewResponseController(w).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(broken.Close)
	p := newTestPool(t, []string{broken.URL, good.URL}, vllm.WithModel(good.Model()))
	req := scorer.Request{K: 20, Sequences: []scorer.Sequence{{Tokens: tokens, Positions: []int{5, len(tokens) - 1}}}}
	res, err := p.Score(bg, req)
	require.NoError(t, err)
	want, err := good.Client(fastRetry...).Score(bg, req)
	require.NoError(t, err)
	require.Equal(t, want, res)
	require.Equal(t, 1, hits)
	require.Equal(t, []string{good.URL}, p.Healthy())

	// Alone, the broken server's answer is an error that says the body broke.
	_, err = newTestClient(t, broken.URL, vllm.WithModel("m"), vllm.WithRetryMax(0)).Score(bg, req)
	require.ErrorContains(t, err, "read response")
}

// A scoring answer that stops in the middle of its body ends at the attempt's limit,
// as any other answer does.
func TestScoreStallInTheMiddleOfTheBodyTimesOut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		body := promptLogprobsPayload(100, 5)
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c := newTestClient(t, srv.URL, vllm.WithModel("m"), vllm.WithRetryMax(0),
		vllm.WithTimeouts(vllm.Timeouts{ScoreBase: 50 * time.Millisecond, ScorePerToken: time.Microsecond}))
	_, err := c.Score(bg, scorer.Request{K: 5, Sequences: []scorer.Sequence{{Tokens: make([]int32, 100), Positions: []int{99}}}})
	var te *vllm.AttemptTimeoutError
	require.ErrorAs(t, err, &te)
	require.False(t, te.Headers, "the headers came; the body did not")
}

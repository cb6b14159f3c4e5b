package judge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/vllm"
)

// draft is what a thinking judge writes while it thinks: a decision and a hint it has
// not settled on yet.
const draft = `The test output shows fizzbuzz(0) failed. Maybe \boxed{1} [HINT_START]Return an empty list for n = 0 before looping.[HINT_END] But wait, the assistant could not know the spec yet, so perhaps`

// wireChoice is the message every choice of a fake vLLM answer carries; a nil content or
// reasoning is sent as null. finish is sent as a string, except the values finishNull
// and finishOmitted.
type wireChoice struct {
	content, reasoning *string
	finish             string
}

// Finish reasons of a server that does not say why it ended a choice.
const (
	finishNull    = "<null>"    // "finish_reason": null
	finishOmitted = "<omitted>" // no "finish_reason" member
)

// draftHint is the hint in draft.
const draftHint = "Return an empty list for n = 0 before looping."

func str(s string) *string { return &s }

// vllmChat is a loopback server that answers POST /v1/chat/completions with vLLM's
// JSON (0.10.x field set, reasoning under "reasoning_content"): n copies of choice, or
// one when ignoreN is set, as servers that ignore n do. It counts the requests.
func vllmChat(t *testing.T, choice wireChoice, ignoreN bool, requests *atomic.Int32) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		requests.Add(1)
		var req struct {
			N int `json:"n"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		n := max(req.N, 1)
		if ignoreN {
			n = 1
		}
		null := func(s *string) string {
			if s == nil {
				return "null"
			}
			b, _ := json.Marshal(*s)
			return string(b)
		}
		finish := fmt.Sprintf(`,"finish_reason":%q`, choice.finish)
		switch choice.finish {
		case finishNull:
			finish = `,"finish_reason":null`
		case finishOmitted:
			finish = ""
		}
		var choices []string
		for i := range n {
			choices = append(choices, fmt.Sprintf(`{"index":%d,"message":{"role":"assistant","content":%s,"refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[],"reasoning_content":%s},"logprobs":null%s,"stop_reason":null,"token_ids":null}`,
				i, null(choice.content), null(choice.reasoning), finish))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-8d1f0c2e","object":"chat.completion","created":1730000000,"model":"judge","choices":[%s],"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":312,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":null},"prompt_logprobs":null,"prompt_token_ids":null,"kv_transfer_params":null}`,
			strings.Join(choices, ","), 312+40*n, 40*n)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestLLMCutOrThinkingIsNeverAVote attacks the judge the way a thinking judge's server
// answers over the wire: outputs cut at max_tokens mid-thought, thinking closed or not,
// a decision only in the reasoning field, an aborted choice, two decisions, and a server
// that ignores n. None may yield a hint.
func TestLLMCutOrThinkingIsNeverAVote(t *testing.T) {
	tests := []struct {
		name     string
		choice   wireChoice
		ignoreN  bool
		wantReqs int32
		want     string // Unparsed of every vote
		wantHint string
	}{
		{"thinking-only judge cut mid-thought", wireChoice{content: str(draft), finish: "length"}, false, 1, judge.UnparsedTruncated, ""},
		{"cut after a complete-looking answer", wireChoice{content: str(pos1), finish: "length"}, false, 1, judge.UnparsedTruncated, ""},
		{"server ignores n, every vote cut", wireChoice{content: str(draft), finish: "length"}, true, 3, judge.UnparsedTruncated, ""},
		{"thought closed, no answer after it", wireChoice{content: str(draft + "</think>\n\nNo lesson here."), finish: "stop"}, false, 1, judge.UnparsedNoDecision, ""},
		{"thought opened and never closed", wireChoice{content: str("<think>\n" + draft), finish: "stop"}, false, 1, judge.UnparsedOnlyThinking, ""},
		{"server ignores n, thought closed", wireChoice{content: str(draft + "</think>\n\nNo lesson here."), finish: "stop"}, true, 3, judge.UnparsedNoDecision, ""},
		{"decision only in reasoning_content", wireChoice{reasoning: str(draft + `</think> \boxed{1} [HINT_START]Return early for n = 0.[HINT_END]`), finish: "stop"}, false, 1, judge.UnparsedEmptyContent, ""},
		{"aborted choice", wireChoice{content: str(pos1), finish: "abort"}, false, 1, judge.UnparsedUnfinished, ""},
		{"two decisions", wireChoice{content: str(`\boxed{-1} on reflection \boxed{1} [HINT_START]Return an empty list for n = 0.[HINT_END]`), finish: "stop"}, false, 1, judge.UnparsedConflictingDecisions, ""},
		{"finished answer after thinking", wireChoice{content: str(draft + "</think>\n\n" + pos1), finish: "stop"}, false, 1, "", "Check fizzbuzz(0) returns an empty list."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int32
			c, err := vllm.NewClient(vllmChat(t, tt.choice, tt.ignoreN, &requests), vllm.WithModel("judge"), vllm.WithRetryMax(0))
			require.NoError(t, err)
			h, err := newLLM(t, c, judge.LLMConfig{}).Judge(context.Background(), turn)
			require.NoError(t, err)
			require.Equal(t, tt.wantReqs, requests.Load())
			got := make([]string, len(h.Votes))
			for i, v := range h.Votes {
				got[i] = v.Unparsed
				if v.Unparsed != "" {
					require.Zero(t, v.Score, "vote %d", i)
				}
				require.NotEqual(t, draftHint, v.Hint, "vote %d carries the hint drafted mid-thought", i)
			}
			if diff := cmp.Diff([]string{tt.want, tt.want, tt.want}, got); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			require.Equal(t, tt.wantHint, h.Text)
		})
	}
}

// TestLLMUnknownFinishReasonIsNeverAVote puts the judge behind a server that does not
// say why it ended a choice (finish_reason null, or no finish_reason at all) over
// loopback HTTP. Its content may have been cut mid-thought, as in draft, or look like a
// finished answer: no vote is read from either, each is counted as unknown_finish, and
// the logger is warned once for all the calls.
func TestLLMUnknownFinishReasonIsNeverAVote(t *testing.T) {
	tests := []struct {
		name     string
		choice   wireChoice
		ignoreN  bool
		wantReqs int32
	}{
		{"null, a thought cut mid-way", wireChoice{content: str(draft), finish: finishNull}, false, 1},
		{"omitted, a thought cut mid-way", wireChoice{content: str(draft), finish: finishOmitted}, false, 1},
		{"null, a complete-looking answer", wireChoice{content: str(pos1), finish: finishNull}, false, 1},
		{"omitted, a complete-looking answer", wireChoice{content: str(pos1), finish: finishOmitted}, false, 1},
		{"omitted, server ignores n", wireChoice{content: str(draft), finish: finishOmitted}, true, 3},
		{"empty string", wireChoice{content: str(draft), finish: ""}, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int32
			c, err := vllm.NewClient(vllmChat(t, tt.choice, tt.ignoreN, &requests), vllm.WithModel("judge"), vllm.WithRetryMax(0))
			require.NoError(t, err)
			var log bytes.Buffer
			j := newLLM(t, c, judge.LLMConfig{Selection: judge.LongestPositive, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			for range 2 {
				h, err := j.Judge(context.Background(), turn)
				require.NoError(t, err)
				require.Empty(t, h.Text, "no hint from a choice that may have been cut")
				require.Len(t, h.Votes, 3)
				for i, v := range h.Votes {
					require.Equal(t, judge.UnparsedUnknownFinish, v.Unparsed, "vote %d", i)
					require.Zero(t, v.Score, "vote %d", i)
					require.Empty(t, v.Hint, "vote %d", i)
					require.Equal(t, *tt.choice.content, v.Raw, "vote %d keeps the output", i)
				}
			}
			require.Equal(t, 2*tt.wantReqs, requests.Load())
			require.Equal(t, 1, strings.Count(log.String(), "level=WARN"), log.String())
			require.Contains(t, log.String(), "did not say why it ended a choice")
		})
	}
}

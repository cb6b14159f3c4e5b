package vllm_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm"
)

func TestDecodeBatchedCompletion(t *testing.T) {
	resp, err := vllm.DecodeCompletionResponse(readTestdata(t, "completions_batched.json"))
	require.NoError(t, err)
	require.Equal(t, "Qwen/Qwen3-8B", resp.Model)
	require.Equal(t, vllm.Usage{PromptTokens: 12, CompletionTokens: 4, TotalTokens: 16}, resp.Usage)
	require.Len(t, resp.Choices, 4)

	// Prompt p, sample j is choice p*n+j.
	p1 := resp.ChoicesOf(1, 2)
	require.Equal(t, []int{2, 3}, []int{p1[0].Index, p1[1].Index})
	require.Equal(t, []int32{151644, 100}, p1[0].PromptTokenIDs)
	require.Equal(t, []int32{30}, p1[1].TokenIDs)

	want := &vllm.PromptLogprobs{
		Offsets:  []int32{0, 0, 2, 5, 7},
		IDs:      []int32{872, 13, 198, 25, 11, 9707, 40},
		Logprobs: []float32{-0.5, -1.25, vllm.NegInfLogprob, -0.125, -2.5, -1.5, -0.75},
		Ranks:    []int32{1, 2, 151000, 1, 2, 2, 1},
	}
	for _, ch := range resp.ChoicesOf(0, 2) {
		if d := cmp.Diff(want, ch.PromptLogprobs); d != "" {
			t.Errorf("choice %d prompt_logprobs (-want +got):\n%s", ch.Index, d)
		}
	}
	pl := resp.Choices[0].PromptLogprobs
	require.Equal(t, 4, pl.Len())

	for _, tc := range []struct {
		name    string
		pos, k  int
		ids     []int32
		lps     []float32
		tokenID int32
		tokenLP float32
	}{
		{"k entries, actual is top-1", 1, 2, []int32{872, 13}, []float32{-0.5, -1.25}, 872, -0.5},
		{"k+1 entries, actual outside top-k at -9999", 2, 2, []int32{25, 11}, []float32{-0.125, -2.5}, 198, -9999},
		{"key order is not rank order", 3, 2, []int32{40, 9707}, []float32{-0.75, -1.5}, 9707, -1.5},
		{"k smaller than sent", 3, 1, []int32{40}, []float32{-0.75}, 9707, -1.5},
		{"null position", 0, 2, nil, nil, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, lps, err := pl.AppendTopK(tc.pos, tc.k, nil, nil)
			require.NoError(t, err)
			if d := cmp.Diff(tc.ids, ids); d != "" {
				t.Errorf("ids (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.lps, lps); d != "" {
				t.Errorf("logprobs (-want +got):\n%s", d)
			}
			lp, _, ok := pl.Lookup(tc.pos, tc.tokenID)
			require.Equal(t, tc.tokenID >= 0, ok)
			require.Equal(t, tc.tokenLP, lp)
		})
	}
}

func TestTopKWithoutRanksUsesLogprobs(t *testing.T) {
	pl, err := vllm.DecodePromptLogprobs([]byte(`[null,{"5":{"logprob":-3,"rank":null},"6":{"logprob":-0.5,"rank":null},"7":{"logprob":-1}}]`))
	require.NoError(t, err)
	ids, lps, err := pl.AppendTopK(1, 2, nil, nil)
	require.NoError(t, err)
	require.Equal(t, []int32{6, 7}, ids)
	require.Equal(t, []float32{-0.5, -1}, lps)
}

func TestTopKTiedRanks(t *testing.T) {
	// The actual token 9 ties with the rank-2 token: vLLM gives both rank 2.
	pl, err := vllm.DecodePromptLogprobs([]byte(`[null,{"9":{"logprob":-1,"rank":2},"5":{"logprob":-0.5,"rank":1},"6":{"logprob":-1,"rank":2},"7":{"logprob":-1.5,"rank":3}}]`))
	require.NoError(t, err)
	ids, lps, err := pl.AppendTopK(1, 3, nil, nil)
	require.NoError(t, err)
	require.Equal(t, []int32{5, 9, 6}, ids)
	require.Equal(t, []float32{-0.5, -1, -1}, lps)
}

func TestTopKManyEntries(t *testing.T) {
	// More than 256 entries takes the general path; ranks arrive reversed.
	js := []byte(`[null,{`)
	for i := 300; i >= 1; i-- {
		js = append(js, []byte(`"`+itoa(1000+i)+`":{"logprob":-`+itoa(i)+`,"rank":`+itoa(i)+`}`)...)
		if i > 1 {
			js = append(js, ',')
		}
	}
	js = append(js, []byte(`}]`)...)
	pl, err := vllm.DecodePromptLogprobs(js)
	require.NoError(t, err)
	ids, lps, err := pl.AppendTopK(1, 3, nil, nil)
	require.NoError(t, err)
	require.Equal(t, []int32{1001, 1002, 1003}, ids)
	require.Equal(t, []float32{-1, -2, -3}, lps)
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestDecodePromptLogprobsRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not a list", `{}`, `want '['`},
		{"key not an id", `[null,{"abc":{"logprob":-1,"rank":1}}]`, "not a token id"},
		{"negative id", `[null,{"-3":{"logprob":-1,"rank":1}}]`, "not a token id"},
		{"missing logprob", `[null,{"3":{"rank":1}}]`, "no logprob"},
		{"string logprob", `[null,{"3":{"logprob":"x","rank":1}}]`, "want a number"},
		{"infinite logprob", `[null,{"3":{"logprob":-1e999,"rank":1}}]`, "not a finite float32"},
		{"NaN literal", `[null,{"3":{"logprob":NaN,"rank":1}}]`, "want a number"},
		{"hex float", `[null,{"3":{"logprob":0x1p-2,"rank":1}}]`, "found 'x'"},
		{"fractional rank", `[null,{"3":{"logprob":-1,"rank":1.5}}]`, "not an integer"},
		{"rank zero", `[null,{"3":{"logprob":-1,"rank":0}}]`, "want ≥ 1"},
		{"truncated", `[null,{"3":{"logprob":-1,"rank":1}`, "unexpected end"},
		{"trailing data", `[null] x`, "after the top-level value"},
		{"trailing comma", `[null,]`, "found ']'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vllm.DecodePromptLogprobs([]byte(tc.in))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDecodePromptLogprobsNullAndEscapes(t *testing.T) {
	pl, err := vllm.DecodePromptLogprobs([]byte(`null`))
	require.NoError(t, err)
	require.Equal(t, 0, pl.Len())

	pl, err = vllm.DecodePromptLogprobs([]byte(" [ null , {\"\\u0034\\u0032\" : {\"decoded_token\":\"\\\"q\\\"\",\"extra\":[1,{\"a\":null}],\"logprob\":-1.5e-1,\"rank\":3} } ] "))
	require.NoError(t, err)
	want := &vllm.PromptLogprobs{Offsets: []int32{0, 0, 1}, IDs: []int32{42}, Logprobs: []float32{-0.15}, Ranks: []int32{3}}
	if d := cmp.Diff(want, pl); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestDecodeTokenIDStrings(t *testing.T) {
	resp, err := vllm.DecodeCompletionResponse(readTestdata(t, "completions_token_id_strings.json"))
	require.NoError(t, err)
	ch := resp.Choices[0]
	require.Equal(t, []int32{13048, 1052, 151645}, ch.TokenIDs, "ids recovered from token_id:N strings")
	require.Nil(t, ch.PromptTokenIDs)
	require.Nil(t, ch.PromptLogprobs)
	require.Equal(t, 151645.0, ch.StopReason)
	require.Equal(t, "stop", ch.FinishReason)
}

func TestDecodeCompletionResponseRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not an object", `[]`, `want '{'`},
		{"index out of order", `{"choices":[{"index":1}]}`, "choices[0] has index 1"},
		{"bad token_ids", `{"choices":[{"index":0,"token_ids":["a"]}]}`, "want a number"},
		{"bad prompt_logprobs", `{"choices":[{"index":0,"prompt_logprobs":[null,{"1":{}}]}]}`, "choices[0]: prompt_logprobs[1]: token 1: no logprob"},
		{"truncated", `{"choices":[{"index":0`, "unexpected end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vllm.DecodeCompletionResponse([]byte(tc.in))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParseTokenIDString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		id   int32
		isID bool
	}{
		{"token_id:0", 0, true},
		{"token_id:151645", 151645, true},
		{"token_id:-1", 0, false},
		{"token_id:", 0, false},
		{"token_id:99999999999", 0, false},
		{"Hello", 0, false},
	} {
		id, ok := vllm.ParseTokenIDString(tc.in)
		require.Equal(t, tc.isID, ok, tc.in)
		require.Equal(t, tc.id, id, tc.in)
	}
}

func TestIsNegInf(t *testing.T) {
	require.True(t, vllm.IsNegInf(-9999))
	require.True(t, vllm.IsNegInf(-10000))
	require.False(t, vllm.IsNegInf(-9998.5))
	require.False(t, vllm.IsNegInf(0))
}

func TestTopKBadArguments(t *testing.T) {
	pl, err := vllm.DecodePromptLogprobs([]byte(`[null,{"5":{"logprob":-3,"rank":1}}]`))
	require.NoError(t, err)
	for _, tc := range []struct{ j, k int }{{-1, 1}, {2, 1}, {1, 0}} {
		_, _, err := pl.AppendTopK(tc.j, tc.k, nil, nil)
		require.Error(t, err, "j=%d k=%d", tc.j, tc.k)
	}
}

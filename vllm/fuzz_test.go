package vllm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentic-opd/agenticopd/vllm"
)

// referencePromptLogprobs decodes prompt_logprobs the slow, obvious way, with the
// same rules as the scanner: ids are keys of decimal digits, logprob is required and
// finite, rank is null or an integer ≥ 1. ok is false when the input breaks a rule
// or a position repeats an id (maps cannot tell).
func referencePromptLogprobs(data []byte) (entries [][][3]float64, ok bool) {
	var raw []map[string]map[string]json.RawMessage
	if json.Unmarshal(data, &raw) != nil {
		return nil, false
	}
	for _, pos := range raw {
		var es [][3]float64
		for k, fields := range pos {
			if fields == nil {
				return nil, false
			}
			if k == "" || (k[0] == '-' && len(k) > 1 && k[1] != '0') || k[0] == '+' {
				return nil, false
			}
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil || id < 0 {
				return nil, false
			}
			var lp *float32
			if b, has := fields["logprob"]; !has || json.Unmarshal(b, &lp) != nil || lp == nil {
				return nil, false
			}
			var rank *int32
			if b, has := fields["rank"]; has && json.Unmarshal(b, &rank) != nil {
				return nil, false
			}
			r := 0.0
			if rank != nil {
				if *rank < 1 {
					return nil, false
				}
				r = float64(*rank)
			}
			es = append(es, [3]float64{float64(id), float64(*lp), r})
		}
		slices.SortFunc(es, func(a, b [3]float64) int { return int(a[0] - b[0]) })
		entries = append(entries, es)
	}
	return entries, true
}

func FuzzDecodePromptLogprobs(f *testing.F) {
	f.Add([]byte(`null`))
	f.Add([]byte(`[null,{"872":{"logprob":-0.5,"rank":1,"decoded_token":"user"},"13":{"logprob":-1.25,"rank":2,"decoded_token":"."}}]`))
	f.Add([]byte(`[null,{"198":{"logprob":-9999.0,"rank":151000,"decoded_token":"\n"},"25":{"logprob":-0.125,"rank":1,"decoded_token":null}}]`))
	f.Add([]byte(`[null,{"\u0034":{"logprob":-1e-3,"rank":null,"x":[{"y":true}]}},null]`))
	f.Add([]byte(`[null,{"1":{"logprob":1e999}}]`))
	f.Add(promptLogprobsPayload(4, 3)[0:0])
	for _, seed := range fastPathSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pl, err := vllm.DecodePromptLogprobs(data)
		ref, ok := referencePromptLogprobs(data)
		if err != nil {
			if ok && !hasDuplicateKeys(data) {
				t.Fatalf("scanner refused what the reference accepts: %v", err)
			}
			return
		}
		if len(pl.Offsets) > 0 && int(pl.Offsets[len(pl.Offsets)-1]) != len(pl.IDs) {
			t.Fatalf("offsets end at %d, %d ids", pl.Offsets[len(pl.Offsets)-1], len(pl.IDs))
		}
		if len(pl.IDs) != len(pl.Logprobs) || len(pl.IDs) != len(pl.Ranks) {
			t.Fatal("arrays are not parallel")
		}
		for j := range pl.Len() {
			ids, lps, ranks := pl.Entries(j)
			for e := range ids {
				if ids[e] < 0 || ranks[e] < 0 || lps[e] != lps[e] {
					t.Fatalf("position %d: bad entry %d %g %d", j, ids[e], lps[e], ranks[e])
				}
			}
			if top, _, err := pl.AppendTopK(j, 5, nil, nil); err != nil || len(top) > 5 {
				t.Fatalf("top-5 has %d entries", len(top))
			}
		}
		if !ok {
			return // the scanner is more lenient (escapes inside skipped strings)
		}
		if pl.Len() != len(ref) {
			if string(data) == "null" && len(ref) == 0 {
				return
			}
			t.Fatalf("%d positions, reference %d", pl.Len(), len(ref))
		}
		for j := range ref {
			ids, lps, ranks := pl.Entries(j)
			var got [][3]float64
			for e := range ids {
				got = append(got, [3]float64{float64(ids[e]), float64(lps[e]), float64(ranks[e])})
			}
			slices.SortFunc(got, func(a, b [3]float64) int { return int(a[0] - b[0]) })
			if len(got) != len(ref[j]) {
				return // repeated keys collapse in the reference's map
			}
			if d := cmp.Diff(ref[j], got); d != "" {
				t.Fatalf("position %d (-reference +scanner):\n%s", j, d)
			}
		}
	})
}

// fastPathSeeds are answers written as vLLM writes them, which the decoder's fast path
// reads, and near misses that it leaves to the general path.
var fastPathSeeds = []string{
	`[null,{"872":{"logprob":-0.5,"rank":1,"decoded_token":"user"},"13":{"logprob":-1.25,"rank":null,"decoded_token":"a\"b\n"}},{"5":{"logprob":-9999.0,"rank":151000,"decoded_token":null},"60":{"logprob":-1e-3,"rank":2}},{}]`,
	`[null,{"007":{"logprob":16777217,"rank":1,"decoded_token":""},"0":{"logprob":-3.014256586212193e+29,"rank":2,"decoded_token":"x"}}]`,
	`[null,{"1234567890":{"logprob":-1,"rank":1,"decoded_token":"x"}},{"5":{"logprob":-1,"rank":0,"decoded_token":"x"}}]`,
	`[null,{"5":{"logprob":-1,"rank":1,"decoded_token":"x"},"5":{"logprob":-2,"rank":2,"decoded_token":"y"}}]`,
	`[null,{"5":{"logprob":-1,"rank":1,"decoded_token":"x"} ,"6":{"rank":2,"logprob":-2}},{"7":{"logprob":01,"rank":1}}]`,
	`[null,{"5":{"logprob":-1,"rank":1,"decoded_token":"\q"}},{"6":{"logprob":1e39,"rank":1}},{"7":{"logprob":-1,"rank":1.0}}]`,
	"[null,{\"5\":{\"logprob\":-1,\"rank\":1,\"decoded_token\":\"a\x01\"}}]",
}

// checkFastLikeGeneral requires DecodePromptLogprobs to give what the general path
// alone gives: the same positions and entries, or the same error.
func checkFastLikeGeneral(t testing.TB, data []byte) {
	t.Helper()
	got, err := vllm.DecodePromptLogprobs(data)
	want, wantErr := vllm.DecodePromptLogprobsGeneral(data)
	if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v, general path %v", data, err, wantErr)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("%q: (-general +fast):\n%s", data, d)
	}
}

// TestFastPathLikeGeneral checks the fast path against the general path on answers
// written as vLLM writes them and on every one-byte change to them: a byte deleted,
// replaced or inserted, and the answer cut there.
func TestFastPathLikeGeneral(t *testing.T) {
	_, pl, _ := strings.Cut(string(promptLogprobsPayload(3, 2)), `"prompt_logprobs":`)
	pl, _, _ = strings.Cut(pl, `,"prompt_token_ids"`)
	if !strings.HasPrefix(pl, "[null,{") || !strings.HasSuffix(pl, "}]") {
		t.Fatalf("not a prompt_logprobs list: %s", pl)
	}
	bases := append([]string{pl}, fastPathSeeds...)
	bytesToTry := []byte(" \t\"\\0159-.eE+,:{}[]nx\x01\xff")
	for _, base := range bases {
		checkFastLikeGeneral(t, []byte(base))
		for i := range len(base) {
			checkFastLikeGeneral(t, []byte(base[:i]))
			checkFastLikeGeneral(t, []byte(base[:i]+base[i+1:]))
			for _, c := range bytesToTry {
				checkFastLikeGeneral(t, []byte(base[:i]+string(c)+base[i+1:]))
				checkFastLikeGeneral(t, []byte(base[:i]+string(c)+base[i:]))
			}
		}
	}
}

func FuzzFastPathLikeGeneral(f *testing.F) {
	for _, seed := range fastPathSeeds {
		f.Add([]byte(seed))
	}
	f.Add(promptLogprobsPayload(4, 3))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastLikeGeneral(t, data)
	})
}

// hasDuplicateKeys reports whether any object in data repeats a key: the reference's
// maps keep only the last value of a repeated key, so inputs with repeats are excused.
func hasDuplicateKeys(data []byte) bool {
	dup, _ := dupKeys(json.NewDecoder(bytes.NewReader(data)))
	return dup
}

func dupKeys(dec *json.Decoder) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return false, err
			}
			if ks, _ := k.(string); seen[ks] {
				return true, nil
			} else {
				seen[ks] = true
			}
			if dup, err := dupKeys(dec); dup || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token()
		return false, err
	case json.Delim('['):
		for dec.More() {
			if dup, err := dupKeys(dec); dup || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token()
		return false, err
	}
	return false, nil
}

func FuzzDecodeError(f *testing.F) {
	for _, name := range []string{
		"error_flat_max_logprobs.json", "error_nested_max_logprobs.json", "error_context_length.json",
		"error_model_not_found.json", "error_string.json", "error_detail_string.json",
		"error_detail_list.json", "error_plain.txt", "error_internal_nested.json",
	} {
		f.Add(400, readTestdata(f, name))
	}
	f.Add(500, []byte(``))
	f.Add(404, []byte(`{"detail":[{"loc":[],"msg":"x"}]}`))
	f.Add(400, []byte(`{"error":{"message":"Requested sample logprobs of -5, which is greater than max allowed: 99999999999999999999"}}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := vllm.DecodeError(status, body)
		if e.Status != status {
			t.Fatalf("status %d, want %d", e.Status, status)
		}
		if e.Message == "" && status >= 100 && status < 600 && httpStatusKnown(status) {
			t.Fatal("empty message")
		}
		_ = e.Error()
		var ml *vllm.MaxLogprobsError
		if errors.As(e, &ml) != errors.Is(e, vllm.ErrMaxLogprobs) {
			t.Fatal("MaxLogprobsError and ErrMaxLogprobs disagree")
		}
		// A body in the nested shape keeps its message exactly (keys match exactly,
		// not case-insensitively as encoding/json's struct fields would).
		var top map[string]json.RawMessage
		var inner map[string]json.RawMessage
		var msg string
		if json.Unmarshal(body, &top) == nil && len(top) == 1 &&
			json.Unmarshal(top["error"], &inner) == nil && json.Unmarshal(inner["message"], &msg) == nil && msg != "" {
			if e.Message != msg {
				t.Fatalf("message %q, want %q", e.Message, msg)
			}
		}
	})
}

func FuzzDecodeCompletionResponse(f *testing.F) {
	for _, name := range []string{"completions_batched.json", "completions_generate.json", "completions_token_id_strings.json"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := vllm.DecodeCompletionResponse(data)
		if err != nil {
			return
		}
		for i, ch := range resp.Choices {
			if ch.Index != i {
				t.Fatalf("choice %d has index %d", i, ch.Index)
			}
		}
	})
}

func httpStatusKnown(code int) bool { return http.StatusText(code) != "" }

func FuzzDecodeChatCompletionResponse(f *testing.F) {
	for _, name := range []string{"chat_completion.json", "chat_completion_prompt_logprobs.json"} {
		f.Add(readTestdata(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := vllm.DecodeChatCompletionResponse(data)
		if err != nil {
			return
		}
		for i, ch := range resp.Choices {
			if ch.Index != i {
				t.Fatalf("choice %d has index %d", i, ch.Index)
			}
		}
		if pl := resp.PromptLogprobs; pl != nil {
			if pl.Len() > 0 && (int(pl.Offsets[pl.Len()]) != len(pl.IDs) || len(pl.IDs) != len(pl.Logprobs) || len(pl.IDs) != len(pl.Ranks)) {
				t.Fatal("prompt_logprobs arrays disagree")
			}
		}
	})
}

package vllmtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// uncachedEncode tokenizes text as encode does, without the segment cache.
func uncachedEncode(t *tokenizer, text string) []int32 {
	var out []int32
	for _, seg := range splitSpecial(text) {
		if seg.special >= 0 {
			out = append(out, seg.special)
			continue
		}
		for _, c := range pretokenize(seg.text) {
			out = append(out, t.encodeChunk(c)...)
		}
	}
	return out
}

// segmentCacheLikeNone checks that encoding text gives what encoding it without the
// segment cache gives, the first time and once its runs are cached, and that
// changing what encode returned leaves later encodings alone.
func segmentCacheLikeNone(t *testing.T, text string) {
	tok := defaultTokenizer()
	want := uncachedEncode(tok, text)
	for range 2 {
		got := tok.encode(text)
		require.Equal(t, want, got, text)
		for i := range got {
			got[i] = -1
		}
	}
}

func TestSegmentCacheLikeNone(t *testing.T) {
	for _, text := range []string{
		"", "x", "<|im_start|>", "<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n",
		"<tool_call>\n{\"name\": \"terminal\"}\n</tool_call>", "two  spaces\n\n\nand lines", "héllo wörld 123",
	} {
		segmentCacheLikeNone(t, text)
	}
}

func FuzzSegmentCacheLikeNone(f *testing.F) {
	f.Add("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n")
	f.Add("a<think>b</think>c")
	f.Fuzz(segmentCacheLikeNone)
}

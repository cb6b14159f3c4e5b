package vllmtest

import (
	"slices"
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

// decodeTurnsLikeDecode checks that decodeTurns gives what decode gives, before and
// after it remembers the turns of ids.
func decodeTurnsLikeDecode(t *testing.T, ids []int32) {
	tok := defaultTokenizer()
	want, wantErr := tok.decode(ids, false)
	for range 2 {
		got, err := tok.decodeTurns(ids)
		require.Equal(t, wantErr, err)
		require.Equal(t, want, got)
	}
}

func TestDecodeTurnsLikeDecode(t *testing.T) {
	tok := defaultTokenizer()
	chat := tok.encode("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
	for _, ids := range [][]int32{
		nil, {}, {ImStart}, {ImStart, ImStart}, {1, 2, ImStart}, chat, chat[1:], append(slices.Clone(chat), ImStart),
		{ImStart, 5, -1}, {ImStart, 5, ImStart, int32(tok.vocabSize())},
	} {
		decodeTurnsLikeDecode(t, ids)
	}
}

func FuzzDecodeTurnsLikeDecode(f *testing.F) {
	f.Add([]byte{1, 2, 1, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := make([]int32, len(b))
		for i, c := range b {
			ids[i] = int32(c) // every byte id
			if c%7 == 0 {
				ids[i] = ImStart
			}
		}
		decodeTurnsLikeDecode(t, ids)
	})
}

package vllmtest

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Special token ids. They come right after the 256 byte tokens; every id from
// [FirstMergeID] on is a learned BPE merge. Special tokens are matched whole in text (as
// Hugging Face tokenizers do with added tokens) and are never produced by a merge.
const (
	EndOfText       int32 = 256 // <|endoftext|>
	ImStart         int32 = 257 // <|im_start|>
	ImEnd           int32 = 258 // <|im_end|>
	ToolCall        int32 = 259 // <tool_call>
	ToolCallEnd     int32 = 260 // </tool_call>
	ToolResponse    int32 = 261 // <tool_response>
	ToolResponseEnd int32 = 262 // </tool_response>
	Think           int32 = 263 // <think>
	ThinkEnd        int32 = 264 // </think>

	// FirstMergeID is the id of the first learned merge token.
	FirstMergeID int32 = 265
)

// specialLiterals is indexed by id - EndOfText.
var specialLiterals = [...]string{
	"<|endoftext|>", "<|im_start|>", "<|im_end|>",
	"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
	"<think>", "</think>",
}

// maxMerges bounds the number of merges learned from the embedded corpus.
const maxMerges = 1800

//go:embed corpus.txt
var corpus string

// tokenizer is a byte-level BPE with special tokens. It is immutable after
// construction and safe for concurrent use.
type tokenizer struct {
	pieces [][]byte           // id -> bytes (special ids map to their literal)
	ranks  map[[2]int32]int32 // pair -> merged id (lower id = earlier merge)
	// jsonPiece holds each id's decoded string as a JSON string literal.
	jsonPiece [][]byte

	// cache maps a pre-tokenized chunk to its ids; it is read far more than written,
	// from every request goroutine. A map under a read lock is looked up with the
	// chunk's bytes as they are, where a sync.Map boxes every key.
	cacheMu sync.RWMutex
	cache   map[string][]int32

	// segments maps a run of text between special tokens to its ids, which
	// encodeSegment computes from the chunk cache: a conversation is tokenized again
	// every turn, and all but its last messages are runs seen before.
	segMu    sync.RWMutex
	segments map[string][]int32
	segBytes int // the length of segments' keys

	// turns maps the ids of a chat turn, as bytes, to its text (decodeTurns).
	turnMu    sync.RWMutex
	turns     map[string]string
	turnBytes int // the length of turns' keys and values
}

// maxTurnBytes bounds the ids and text of the turns decodeTurns holds.
const maxTurnBytes = 32 << 20

// maxSegmentBytes bounds the text of the runs the segment cache holds.
const maxSegmentBytes = 16 << 20

var (
	sharedTokOnce sync.Once
	sharedTok     *tokenizer
)

// defaultTokenizer returns the process-wide tokenizer trained on the embedded corpus.
func defaultTokenizer() *tokenizer {
	sharedTokOnce.Do(func() { sharedTok = trainTokenizer(corpus, maxMerges) })
	return sharedTok
}

// vocabSize is the number of ids.
func (t *tokenizer) vocabSize() int { return len(t.pieces) }

// trainTokenizer learns up to n merges from text, deterministically: the most frequent
// adjacent pair wins, ties go to the smallest pair of ids. Merges never cross
// pre-tokenization chunks nor special tokens.
func trainTokenizer(text string, n int) *tokenizer {
	t := &tokenizer{ranks: map[[2]int32]int32{}, cache: map[string][]int32{}, segments: map[string][]int32{}, turns: map[string]string{}}
	for b := 0; b < 256; b++ {
		t.pieces = append(t.pieces, []byte{byte(b)})
	}
	for _, lit := range specialLiterals {
		t.pieces = append(t.pieces, []byte(lit))
	}

	counts := map[string]int{}
	for _, seg := range splitSpecial(text) {
		if seg.special >= 0 {
			continue
		}
		for _, c := range pretokenize(seg.text) {
			counts[c]++
		}
	}
	type word struct {
		ids   []int32
		count int
	}
	words := make([]word, 0, len(counts))
	for c, k := range counts {
		ids := make([]int32, len(c))
		for i := 0; i < len(c); i++ {
			ids[i] = int32(c[i])
		}
		words = append(words, word{ids, k})
	}
	pairs := map[[2]int32]int{}
	for _, w := range words {
		for i := 0; i+1 < len(w.ids); i++ {
			pairs[[2]int32{w.ids[i], w.ids[i+1]}] += w.count
		}
	}
	for m := 0; m < n; m++ {
		best, bestN := [2]int32{}, 1
		for p, k := range pairs {
			if k > bestN || (k == bestN && bestN > 1 && lessPair(p, best)) {
				best, bestN = p, k
			}
		}
		if bestN < 2 {
			break
		}
		id := int32(len(t.pieces))
		t.pieces = append(t.pieces, append(append([]byte(nil), t.pieces[best[0]]...), t.pieces[best[1]]...))
		t.ranks[best] = id
		for wi := range words {
			w := &words[wi]
			if !containsPair(w.ids, best) {
				continue
			}
			for i := 0; i+1 < len(w.ids); i++ {
				pairs[[2]int32{w.ids[i], w.ids[i+1]}] -= w.count
			}
			w.ids = mergePair(w.ids, best, id)
			for i := 0; i+1 < len(w.ids); i++ {
				pairs[[2]int32{w.ids[i], w.ids[i+1]}] += w.count
			}
		}
		for p, k := range pairs {
			if k <= 0 {
				delete(pairs, p)
			}
		}
	}
	t.jsonPiece = make([][]byte, len(t.pieces))
	for id, p := range t.pieces {
		b, _ := json.Marshal(strings.ToValidUTF8(string(p), "\uFFFD"))
		t.jsonPiece[id] = b
	}
	return t
}

func lessPair(a, b [2]int32) bool {
	return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1])
}

func containsPair(ids []int32, p [2]int32) bool {
	for i := 0; i+1 < len(ids); i++ {
		if ids[i] == p[0] && ids[i+1] == p[1] {
			return true
		}
	}
	return false
}

func mergePair(ids []int32, p [2]int32, id int32) []int32 {
	out := ids[:0]
	for i := 0; i < len(ids); i++ {
		if i+1 < len(ids) && ids[i] == p[0] && ids[i+1] == p[1] {
			out = append(out, id)
			i++
			continue
		}
		out = append(out, ids[i])
	}
	return out
}

type segment struct {
	text    string
	special int32 // -1 for ordinary text
}

// splitSpecial cuts text at special-token literals.
func splitSpecial(text string) []segment {
	var out []segment
	start := 0
	for i := 0; i < len(text); i++ {
		if text[i] != '<' {
			continue
		}
		for k, lit := range specialLiterals {
			if strings.HasPrefix(text[i:], lit) {
				if i > start {
					out = append(out, segment{text[start:i], -1})
				}
				out = append(out, segment{lit, EndOfText + int32(k)})
				i += len(lit) - 1
				start = i + 1
				break
			}
		}
	}
	if start < len(text) {
		out = append(out, segment{text[start:], -1})
	}
	return out
}

// encode tokenizes text; special-token literals become their special ids.
func (t *tokenizer) encode(text string) []int32 {
	var out []int32
	for _, seg := range splitSpecial(text) {
		if seg.special >= 0 {
			out = append(out, seg.special)
			continue
		}
		out = append(out, t.encodeSegment(seg.text)...)
	}
	return out
}

// encodeSegment tokenizes text without special tokens, through the segment cache; the
// ids it returns are shared and must not be modified.
func (t *tokenizer) encodeSegment(text string) []int32 {
	t.segMu.RLock()
	v, ok := t.segments[text]
	t.segMu.RUnlock()
	if ok {
		return v
	}
	var ids []int32
	for _, c := range pretokenize(text) {
		ids = append(ids, t.encodeChunk(c)...)
	}
	if len(text) > maxSegmentBytes/16 {
		return ids // rare, and would crowd out the rest
	}
	t.segMu.Lock()
	if t.segBytes+len(text) > maxSegmentBytes {
		clear(t.segments)
		t.segBytes = 0
	}
	if _, ok := t.segments[text]; !ok {
		t.segments[strings.Clone(text)] = ids // not the request's text, which it would keep
		t.segBytes += len(text)
	}
	t.segMu.Unlock()
	return ids
}

func (t *tokenizer) encodeChunk(c string) []int32 {
	t.cacheMu.RLock()
	v, ok := t.cache[c]
	t.cacheMu.RUnlock()
	if ok {
		return v
	}
	ids := make([]int32, len(c))
	for i := 0; i < len(c); i++ {
		ids[i] = int32(c[i])
	}
	for len(ids) > 1 {
		bestAt, bestID := -1, int32(0)
		for i := 0; i+1 < len(ids); i++ {
			if id, ok := t.ranks[[2]int32{ids[i], ids[i+1]}]; ok && (bestAt < 0 || id < bestID) {
				bestAt, bestID = i, id
			}
		}
		if bestAt < 0 {
			break
		}
		ids = mergePair(ids, [2]int32{ids[bestAt], ids[bestAt+1]}, bestID)
	}
	t.cacheMu.Lock()
	if len(t.cache) >= 1<<16 {
		clear(t.cache)
	}
	t.cache[c] = ids
	t.cacheMu.Unlock()
	return ids
}

// decode returns the bytes of ids as a string (special tokens as their literals unless
// skipSpecial). It reports the first id outside the vocabulary.
func (t *tokenizer) decode(ids []int32, skipSpecial bool) (string, error) {
	n := 0
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.pieces) {
			return "", fmt.Errorf("token id %d is out of vocabulary (size %d)", id, len(t.pieces))
		}
		n += len(t.pieces[id])
	}
	var b strings.Builder
	b.Grow(n) // once: a prompt's text is up to a context's worth of pieces
	for _, id := range ids {
		if skipSpecial && isSkippedSpecial(id) {
			continue
		}
		b.Write(t.pieces[id])
	}
	return b.String(), nil
}

// decodeTurns is decode(ids, false), through a cache of the text of each turn of a
// chat prompt (its ids from one <|im_start|> to the next): the agent script reads
// back a prompt every turn, all but its last turns seen before.
func (t *tokenizer) decodeTurns(ids []int32) (string, error) {
	var turns []string
	n := 0
	for len(ids) > 0 {
		k := 1 + slices.Index(ids[1:], ImStart)
		if k == 0 {
			k = len(ids)
		}
		text, err := t.decodeTurn(ids[:k])
		if err != nil {
			return "", err
		}
		turns = append(turns, text)
		n += len(text)
		ids = ids[k:]
	}
	if len(turns) == 1 {
		return turns[0], nil
	}
	var b strings.Builder
	b.Grow(n)
	for _, text := range turns {
		b.WriteString(text)
	}
	return b.String(), nil
}

// decodeTurn is decode(ids, false) through the turn cache.
func (t *tokenizer) decodeTurn(ids []int32) (string, error) {
	// the key is the ids' memory, a string without a copy for the lookup
	key := unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(ids))), 4*len(ids))
	t.turnMu.RLock()
	text, ok := t.turns[key]
	t.turnMu.RUnlock()
	if ok {
		return text, nil
	}
	text, err := t.decode(ids, false)
	if err != nil {
		return "", err
	}
	t.turnMu.Lock()
	if t.turnBytes+len(key)+len(text) > maxTurnBytes {
		clear(t.turns)
		t.turnBytes = 0
	}
	if _, dup := t.turns[key]; !dup {
		t.turns[strings.Clone(key)] = text
		t.turnBytes += len(key) + len(text)
	}
	t.turnMu.Unlock()
	return text, nil
}

// isSkippedSpecial reports whether skip_special_tokens removes id from text. As with
// Qwen, only the <|...|> tokens are "special"; <tool_call>, <think> and friends stay.
func isSkippedSpecial(id int32) bool {
	return id == EndOfText || id == ImStart || id == ImEnd
}

// pretokenize splits text into chunks the way Qwen2's pre-tokenizer pattern does:
// contractions, an optional non-letter followed by letters, single digits, an optional
// space followed by punctuation (with trailing newlines), newline runs, and other
// whitespace (leaving the last space to the next word).
func pretokenize(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		n := chunkLen(s[i:])
		out = append(out, s[i:i+n])
		i += n
	}
	return out
}

func chunkLen(s string) int {
	r, w := utf8.DecodeRuneInString(s)
	if r == '\'' && len(s) > 1 {
		low := strings.ToLower(s[1:min(len(s), 3)])
		for _, c := range []string{"re", "ve", "ll", "s", "t", "m", "d"} {
			if strings.HasPrefix(low, c) {
				return 1 + len(c)
			}
		}
	}
	if isLetter(r) {
		return w + letterRun(s[w:])
	}
	if r != '\r' && r != '\n' && !isNumber(r) {
		if r2, _ := utf8.DecodeRuneInString(s[w:]); w < len(s) && isLetter(r2) {
			return w + letterRun(s[w:])
		}
	}
	if isNumber(r) {
		return w
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n]*"
	p := 0
	if r == ' ' {
		p = 1
	}
	if q := punctRun(s[p:]); q > 0 {
		n := p + q
		for n < len(s) && (s[n] == '\r' || s[n] == '\n') {
			n++
		}
		return n
	}
	if unicode.IsSpace(r) {
		ws := spaceRun(s)
		// "\s*[\r\n]+": up to the last newline of the run.
		if j := strings.LastIndexAny(s[:ws], "\r\n"); j >= 0 {
			return j + 1
		}
		// "\s+(?!\S)": leave the last space for the next chunk when text follows.
		if ws < len(s) && ws > 1 {
			_, lw := utf8.DecodeLastRuneInString(s[:ws])
			return ws - lw
		}
		return ws
	}
	return w
}

func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }

func letterRun(s string) int {
	n := 0
	for n < len(s) {
		r, w := utf8.DecodeRuneInString(s[n:])
		if !isLetter(r) {
			break
		}
		n += w
	}
	return n
}

func punctRun(s string) int {
	n := 0
	for n < len(s) {
		r, w := utf8.DecodeRuneInString(s[n:])
		if unicode.IsSpace(r) || isLetter(r) || isNumber(r) {
			break
		}
		n += w
	}
	return n
}

func spaceRun(s string) int {
	n := 0
	for n < len(s) {
		r, w := utf8.DecodeRuneInString(s[n:])
		if !unicode.IsSpace(r) {
			break
		}
		n += w
	}
	return n
}

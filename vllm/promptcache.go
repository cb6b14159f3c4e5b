package vllm

import (
	"bytes"
	"sync"
	"unsafe"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// promptCacheSize is how many recent prompts a promptCache holds: more than the
// rollouts a trainer runs at once against one server, whose next prompts extend them.
const promptCacheSize = 128

// promptCache remembers the JSON lists of the recent one-prompt requests of a Client,
// so that a prompt that extends one of them (an agent's prompt is its last one and
// more) copies that list instead of formatting every id again. It is safe for
// concurrent use; its zero value is empty.
type promptCache struct {
	mu      sync.Mutex
	entries [promptCacheSize]promptEntry
	next    int // the entry to replace next
}

type promptEntry struct {
	ids  []int32 // the cache's copy, whose memory the entry's next prompt reuses
	json []byte  // AppendInt32s of ids; never modified
}

// appendIDs appends jsonscan.AppendInt32s(ids) to dst, then remembers ids and
// their list.
func (pc *promptCache) appendIDs(dst []byte, ids []int32) []byte {
	start := len(dst)
	if n, json := pc.longestPrefix(ids); n > 0 {
		if n == len(ids) {
			dst = append(dst, json...)
		} else {
			dst = append(dst, json[:len(json)-1]...) // without its ']'
			for _, id := range ids[n:] {
				dst = jsonscan.AppendInt32(append(dst, ','), id)
			}
			dst = append(dst, ']')
		}
	} else {
		dst = jsonscan.AppendInt32s(dst, ids)
	}
	pc.add(ids, dst[start:len(dst):len(dst)])
	return dst
}

// longestPrefix returns the length and the list of the longest remembered prompt
// that ids starts with; n is 0 for none.
func (pc *promptCache) longestPrefix(ids []int32) (n int, json []byte) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, e := range pc.entries {
		k := len(e.ids)
		if k == 0 || k > len(ids) || k <= n || e.ids[k-1] != ids[k-1] {
			continue
		}
		if bytes.Equal(idBytes(e.ids), idBytes(ids[:k])) {
			n, json = k, e.json
		}
	}
	return n, json
}

// add remembers ids, copied, and their list json in place of the oldest entry.
func (pc *promptCache) add(ids []int32, json []byte) {
	pc.mu.Lock()
	e := &pc.entries[pc.next]
	e.ids, e.json = append(e.ids[:0], ids...), json
	pc.next = (pc.next + 1) % promptCacheSize
	pc.mu.Unlock()
}

// idBytes is the memory of ids, to compare them at the speed of bytes.Equal.
func idBytes(ids []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ids))), 4*len(ids))
}

package bwrap

import (
	"fmt"
	"sync/atomic"
)

// capture keeps the head and the tail of a stream and counts everything: of a limit
// of N bytes, the first N-N/2 and the last N/2 are kept. Every stream of a command
// also adds to a shared total; past the hard cap it calls over.
type capture struct {
	headMax, tailMax int
	head             []byte
	ring             []byte // the last tailMax bytes after the head; oldest at pos once full
	pos              int
	total            int64
	all              *atomic.Int64
	hard             int64
	over             func()
}

func newCapture(limit int, all *atomic.Int64, hard int64, over func()) *capture {
	return &capture{headMax: limit - limit/2, tailMax: limit / 2, all: all, hard: hard, over: over}
}

func (c *capture) Write(b []byte) (int, error) {
	n := len(b)
	c.total += int64(n)
	if room := c.headMax - len(c.head); room > 0 {
		k := min(room, len(b))
		c.head = append(c.head, b[:k]...)
		b = b[k:]
	}
	c.keepTail(b)
	if c.all.Add(int64(n)) > c.hard {
		c.over()
	}
	return n, nil
}

func (c *capture) keepTail(b []byte) {
	switch {
	case len(b) == 0 || c.tailMax == 0:
		return
	case len(b) >= c.tailMax:
		c.ring = append(c.ring[:0], b[len(b)-c.tailMax:]...)
		c.pos = 0
		return
	}
	if room := c.tailMax - len(c.ring); room > 0 {
		k := min(room, len(b))
		c.ring = append(c.ring, b[:k]...)
		b = b[k:]
	}
	for len(b) > 0 { // the ring is full: overwrite the oldest bytes
		k := copy(c.ring[c.pos:], b)
		c.pos = (c.pos + k) % c.tailMax
		b = b[k:]
	}
}

// truncated reports that bytes were dropped between the head and the tail.
func (c *capture) truncated() bool { return c.total > int64(len(c.head)+len(c.ring)) }

// bytes is what was kept: the whole stream, or its head, a line saying how many
// bytes were cut, and its tail.
func (c *capture) bytes() []byte {
	if !c.truncated() {
		return append(c.head, c.ring...) // the ring never wrapped
	}
	out := make([]byte, 0, len(c.head)+len(c.ring)+48)
	out = append(out, c.head...)
	out = fmt.Appendf(out, "\n...[%d bytes cut]...\n", c.total-int64(len(c.head)+len(c.ring)))
	out = append(out, c.ring[c.pos:]...)
	return append(out, c.ring[:c.pos]...)
}

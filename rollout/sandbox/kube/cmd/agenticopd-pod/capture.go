package main

import "fmt"

// capture keeps the head and the tail of a stream and counts everything, as the
// bubblewrap sandbox's capture does: of a limit of N bytes, the first N-N/2 and the
// last N/2 are kept, and the cut is marked.
type capture struct {
	headMax, tailMax int
	head             []byte
	ring             []byte // the last tailMax bytes after the head; oldest at pos once full
	pos              int
	total            int64
}

func newCapture(limit int) *capture {
	return &capture{headMax: limit - limit/2, tailMax: limit / 2}
}

func (c *capture) Write(b []byte) {
	c.total += int64(len(b))
	if room := c.headMax - len(c.head); room > 0 {
		k := min(room, len(b))
		c.head = append(c.head, b[:k]...)
		b = b[k:]
	}
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

// truncated reports that bytes were dropped between the head and the tail (never
// for a streamed stdout, which keeps nothing).
func (c *capture) truncated() bool {
	return len(c.head) > 0 && c.total > int64(len(c.head)+len(c.ring))
}

// bytes is what was kept: the whole stream, or its head, a line saying how many
// bytes were cut, and its tail.
func (c *capture) bytes() []byte {
	if c.total <= int64(len(c.head)+len(c.ring)) {
		return append(c.head, c.ring...)
	}
	out := make([]byte, 0, len(c.head)+len(c.ring)+48)
	out = append(out, c.head...)
	out = fmt.Appendf(out, "\n...[%d bytes cut]...\n", c.total-int64(len(c.head)+len(c.ring)))
	out = append(out, c.ring[c.pos:]...)
	return append(out, c.ring[:c.pos]...)
}

package atropos

import "unsafe"

// Pace is pace, for the external tests of the back-pressure rules.
var Pace = pace

// Encodes is how many groups c encoded, for the tests of encoding once per Send.
func (c *Client) Encodes() int64 { return c.encodes.Load() }

// LineBuffers are the addresses of the encoding buffers c keeps between sends.
func (c *Client) LineBuffers() []uintptr {
	c.lineBufs.mu.Lock()
	defer c.lineBufs.mu.Unlock()
	var out []uintptr
	for _, b := range c.lineBufs.bufs {
		out = append(out, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	}
	return out
}

package atropos

// Pace is pace, for the external tests of the back-pressure rules.
var Pace = pace

// Encodes is how many groups c encoded, for the tests of encoding once per Send.
func (c *Client) Encodes() int64 { return c.encodes.Load() }

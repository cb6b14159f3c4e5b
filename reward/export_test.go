package reward

// Exported for the tests of package reward_test.
var (
	CheckReply = checkReply
	CodecPy    = codecPy
)

package reward

// Exported for the tests of package reward_test.
var (
	CheckReply   = checkReply
	ParseRequest = func(line []byte) error {
		_, err := parseRequest(line)
		return err
	}
	CodecPy = codecPy
)

// FilterDiff is filterDiff, for the tests of the diff rules.
var FilterDiff = filterDiff

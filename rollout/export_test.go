package rollout

// CapResult exposes capResult to the external tests.
var CapResult = capResult

// ReadLines exposes readLines to the external tests.
var ReadLines = readLines

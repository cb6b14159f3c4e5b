package rollout

// CapResult exposes capResult to the external tests.
var CapResult = capResult

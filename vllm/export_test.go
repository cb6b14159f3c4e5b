package vllm

// ParseTokenIDString is parseTokenIDString, for the external tests.
var ParseTokenIDString = parseTokenIDString

package main

import "runtime"

// goarch is the image's architecture: the helper's own.
func goarch() string { return runtime.GOARCH }

package sandbox

import (
	"context"
)

// ImageRoot is an unpacked image's root file system and the parts of its config a
// sandbox honours.
type ImageRoot struct {
	// Dir is the root file system on the host; sandboxes mount it read-only and never
	// write in it.
	Dir string
	// Env is the image config's Env, "K=V".
	Env []string
	// WorkingDir is the image config's WorkingDir.
	WorkingDir string
	// User is the image config's User.
	User string
	// Release is called once when no sandbox uses the root any longer; it may be nil.
	Release func()
}

// RootSource gives the root file system of an image reference. Implementations must
// be safe for concurrent use. Each ImageRoot it returns is released (its Release
// called) by whoever asked for it.
type RootSource interface {
	Root(ctx context.Context, ref string) (ImageRoot, error)
}

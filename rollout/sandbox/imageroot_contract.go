package sandbox

import "context"

// ImageRoot is an unpacked image's root filesystem and the parts of its config a sandbox honours.
type ImageRoot struct {
	Dir        string   // the root filesystem on the host; sandboxes mount it read-only
	Env        []string // the image config's Env, "K=V"
	WorkingDir string   // the image config's WorkingDir
	User       string   // the image config's User
	Release    func()   // called once when no sandbox uses the root any longer; may be nil
}

// RootSource gives the root filesystem of an image reference. Safe for concurrent use.
type RootSource interface {
	Root(ctx context.Context, ref string) (ImageRoot, error)
}

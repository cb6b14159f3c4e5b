package bwrap

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImageSupport gives the start check of image sandboxes what a host without them
// shows (the trial's error, the kernel's release) and checks the reason New gives.
func TestImageSupport(t *testing.T) {
	refused := errors.New("not ready: mount: rootfs: wrong fs type, bad option, bad superblock on overlay")
	for _, tc := range []struct {
		name    string
		root    bool
		release string
		trial   error
		advice  string // "" for no error
	}{
		{"root mounts on the host", true, "5.4.0", refused, ""},
		{"the trial passed", false, "6.18.44", nil, ""},
		{"old kernel", false, "5.10.0-28-amd64", refused, "needs Linux 5.11 or later (this kernel is 5.10.0-28-amd64)"},
		{"no user namespaces", false, "6.18.44-fc", errors.New("not ready: unshare: unshare failed: No space left on device"),
			"allow unprivileged user namespaces, nested ones included"},
		{"no nested user namespace", false, "6.18.44-fc", errors.New("not ready: bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)"),
			"allow unprivileged user namespaces, nested ones included"},
		{"overlay refused", false, "6.1.0", refused, "keep Config.BaseDir and the image cache on a local file system"},
		{"no util-linux", false, "6.1.0", fmt.Errorf("stat /usr/bin/nsenter: %w", fs.ErrNotExist), "install util-linux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := imageSupport(tc.root, tc.release, tc.trial)
			if tc.advice == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrImageUnsupported)
			require.ErrorIs(t, err, tc.trial)
			var pe *ProbeError
			require.ErrorAs(t, err, &pe)
			require.Contains(t, pe.Advice, tc.advice)
			require.Contains(t, err.Error(), "or run as root")
		})
	}
}

func TestKernelAtLeast(t *testing.T) {
	for release, want := range map[string]bool{
		"5.10.0-28-amd64": false, "5.11.0": true, "5.15.0-91-generic": true, "6.1.0-13-amd64": true,
		"4.19.0": false, "6.18.44-fc-v769": true, "5.11rc1": true, "5.9": false, "": true, "weird": true,
	} {
		require.Equal(t, want, kernelAtLeast(release, 5, 11), release)
	}
}

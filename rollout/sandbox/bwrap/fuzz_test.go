package bwrap_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// FuzzFileToolNames checks that no name, however built, makes the host-side file
// tools touch anything outside the workspace, even with escaping symlinks planted.
// (Fuzz workers stopped at the end of a -fuzz run skip their cleanup, so such a run
// leaves its workspaces under the temporary directory.)
func FuzzFileToolNames(f *testing.F) {
	for _, seed := range []string{
		"a.txt", "d/e/f.txt", "../x", "/etc/x", "a/../../x", "evil", "evil/x", "up/x",
		"abs", "./a", "a//b", "d/../up/workspace/x", ".", "..", "", "pipe",
	} {
		f.Add(seed)
	}
	fac := newFactory(f, bwrap.Config{})
	sb := newSandbox(f, fac)
	outside := filepath.Dir(sb.HostDir())
	target := filepath.Join(f.TempDir(), "target")
	if err := os.WriteFile(target, []byte("host"), 0o644); err != nil {
		f.Fatal(err)
	}
	res, err := sb.Run(f.Context(), commandShell("ln -s /etc evil && ln -s .. up && ln -s "+target+" abs && mkfifo pipe"))
	if err != nil || res.ExitCode != 0 {
		f.Fatalf("plant: %v %s", err, res.Stderr)
	}

	f.Fuzz(func(t *testing.T, name string) {
		err := sb.WriteFile(name, []byte("fuzz"))
		if err == nil {
			got, rerr := sb.ReadFile(name)
			if rerr != nil || string(got) != "fuzz" {
				t.Fatalf("WriteFile(%q) succeeded but ReadFile gives %q, %v", name, got, rerr)
			}
		}
		if _, err := fs.ReadFile(sb.FS(), name); err != nil && errors.Is(err, bwrap.ErrClosed) {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(outside)
		if err != nil {
			t.Fatal(err)
		}
		// The sandbox's own lock file lives beside the workspace, and so do the
		// layers of an overlaid one (without root, or without a tmpfs).
		for _, e := range entries {
			switch e.Name() {
			case "lock", "workspace", "data", "empty", "overlay-work":
			default:
				t.Fatalf("WriteFile(%q) created something beside the workspace: %v", name, entries)
			}
		}
		if empty, err := os.ReadDir(filepath.Join(outside, "empty")); err == nil && len(empty) > 0 {
			t.Fatalf("WriteFile(%q) wrote into the overlay's empty layer: %v", name, empty)
		}
		if b, err := os.ReadFile(target); err != nil || string(b) != "host" {
			t.Fatalf("WriteFile(%q) changed a host file: %q, %v", name, b, err)
		}
	})
}

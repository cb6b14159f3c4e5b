package bwrap_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// BenchmarkImageRunTrue measures the start of a command in an image sandbox (the
// image's root already unpacked and its sandbox made) against the same command in
// today's sandbox, in one run: ms/run of each and their ratio (target: at most 2).
func BenchmarkImageRunTrue(b *testing.B) {
	src := &imageSource{}
	src.add(b, "repo", under("testbed", repoFiles), bwrap.ImageRoot{WorkingDir: "/testbed"})
	f := newFactory(b, bwrap.Config{Images: src})
	plain := newSandbox(b, f)
	img := newImageSandbox(b, f, rollout.SandboxSpec{Image: "repo"})
	cmd := rollout.Command{Argv: []string{"/bin/true"}}
	var took [2]time.Duration
	for b.Loop() {
		for i, sb := range []*bwrap.Sandbox{plain, img} {
			start := time.Now()
			res, err := sb.Run(b.Context(), cmd)
			took[i] += time.Since(start)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("run: %v, exit %d", err, res.ExitCode)
			}
		}
	}
	b.ReportMetric(float64(took[0].Microseconds())/1000/float64(b.N), "ms/run-plain")
	b.ReportMetric(float64(took[1].Microseconds())/1000/float64(b.N), "ms/run-image")
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "image/plain")
}

// BenchmarkImageWorkspace10k measures NewSandboxFor over an image whose working
// directory holds 10,000 files (100 directories of 100, 1 KiB each): the
// copy-on-write view of that directory (overlay: target under 100 ms) and the copy
// fallback, with everything else a sandbox's creation does (its directory, tmpfs,
// root overlay, cgroup). Close is not timed.
func BenchmarkImageWorkspace10k(b *testing.B) {
	files := map[string]string{}
	content := string(make([]byte, 1024))
	for d := range 100 {
		for f := range 100 {
			files[fmt.Sprintf("testbed/d%d/f%d.py", d, f)] = content
		}
	}
	src := &imageSource{}
	dir := src.add(b, "big", files, bwrap.ImageRoot{WorkingDir: "/testbed"})
	n := 0
	require.NoError(b, filepath.WalkDir(filepath.Join(dir, "testbed"), func(string, os.DirEntry, error) error { n++; return nil }))
	require.Equal(b, 10101, n, "entries of the working directory, itself included")
	for _, mode := range []struct {
		name string
		cfg  bwrap.Config
	}{
		{"overlay", bwrap.Config{}},
		{"copy", bwrap.Config{CopyImageWorkspace: true}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			cfg := mode.cfg
			cfg.Images = src
			f := newFactory(b, cfg)
			var took time.Duration
			first := true
			for b.Loop() {
				start := time.Now()
				sb, err := f.NewSandboxFor(b.Context(), rollout.SandboxSpec{Image: "big"})
				took += time.Since(start)
				require.NoError(b, err)
				b.StopTimer()
				if first { // the workspace holds the image's files
					first = false
					res, err := sb.Run(b.Context(), rollout.Command{Shell: "find . -type f | wc -l"})
					require.NoError(b, err)
					require.Equal(b, "10000\n", string(res.Stdout))
				}
				require.NoError(b, sb.Close())
				b.StartTimer()
			}
			b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "ms/setup")
		})
	}
}

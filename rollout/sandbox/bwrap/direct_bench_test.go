package bwrap

import (
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// BenchmarkBwrapDirect runs the same bwrap command line as Sandbox.Run, straight
// through os/exec (no status stream, watcher or quota check), as the baseline for
// BenchmarkRunTrue. With output pipes, Wait also waits for the sandbox's pid
// namespace to be torn down (its init holds the pipes), as Run does; without them it
// returns as soon as bwrap itself has exited.
func BenchmarkBwrapDirect(b *testing.B) {
	b.Run("no-pipes", func(b *testing.B) { benchDirect(b, false) })
	b.Run("pipes", func(b *testing.B) { benchDirect(b, true) })
}

func benchDirect(b *testing.B, pipes bool) {
	f, err := New(b.Context(), Config{})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := f.create(b.Context(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	args := bwrapArgs(f, sb.ws, WorkspaceDir, sb.baseEnv(WorkspaceDir, sandboxBin))
	args = append(append(append(args, "--"), f.prlimitArgs(time.Minute)...), "/bin/true")
	for b.Loop() {
		cmd := exec.Command(f.cfg.BwrapPath, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: f.credential()}
		if pipes {
			cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/run")
}

package kube_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/internal/kubefake"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

func newSandbox(t *testing.T, mod func(*kube.Config)) (*kube.Sandbox, *kubefake.Cluster) {
	t.Helper()
	f, c := newFactory(t, mod)
	sb, err := f.NewSandbox(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb.(*kube.Sandbox), c
}

// TestExecFraming runs commands over the real WebSocket exec wire and the real
// helper: exit codes, stdin and its end, output caps, timeouts.
func TestExecFraming(t *testing.T) {
	sb, c := newSandbox(t, func(cfg *kube.Config) { cfg.OutputLimit = 1000 })
	ctx := t.Context()
	cases := []struct {
		name  string
		cmd   rollout.Command
		check func(t *testing.T, r rollout.CommandResult)
	}{
		{"exit code", rollout.Command{Shell: "exit 3"}, func(t *testing.T, r rollout.CommandResult) {
			if r.ExitCode != 3 {
				t.Errorf("exit %d", r.ExitCode)
			}
		}},
		{"signal", rollout.Command{Shell: "kill -9 $$"}, func(t *testing.T, r rollout.CommandResult) {
			if r.ExitCode != 137 {
				t.Errorf("exit %d", r.ExitCode)
			}
		}},
		{"stdin to its end", rollout.Command{Argv: []string{"/bin/sh", "-c", "wc -c"}, Stdin: bytes.Repeat([]byte("x"), 300000)}, func(t *testing.T, r rollout.CommandResult) {
			if strings.TrimSpace(string(r.Stdout)) != "300000" {
				t.Errorf("stdout %q", r.Stdout)
			}
		}},
		{"stdout and stderr apart", rollout.Command{Shell: "echo out; echo err >&2"}, func(t *testing.T, r rollout.CommandResult) {
			if string(r.Stdout) != "out\n" || string(r.Stderr) != "err\n" {
				t.Errorf("stdout %q stderr %q", r.Stdout, r.Stderr)
			}
		}},
		{"output cap", rollout.Command{Shell: "head -c 100000 /dev/zero | tr '\\0' a"}, func(t *testing.T, r rollout.CommandResult) {
			if !r.OutputTruncated || len(r.Stdout) > 1200 {
				t.Errorf("truncated %v, %d bytes", r.OutputTruncated, len(r.Stdout))
			}
		}},
		{"timeout", rollout.Command{Shell: "sleep 60", Timeout: 100 * time.Millisecond}, func(t *testing.T, r rollout.CommandResult) {
			if !r.TimedOut || r.ExitCode != 124 {
				t.Errorf("timed out %v, exit %d", r.TimedOut, r.ExitCode)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := sb.Run(ctx, tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
	if c.Upgrades.Load() == 0 {
		t.Error("no WebSocket upgrade served")
	}
}

// pidGone reports whether no process has pid (or it is a zombie nobody reaps).
func pidGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err != nil || strings.Contains(string(b), ") Z ")
}

// TestCancelKills: a Run whose ctx ends returns ctx's error, and the command is
// killed in the pod (exec alone would leave it running).
func TestCancelKills(t *testing.T) {
	sb, c := newSandbox(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := sb.Run(ctx, rollout.Command{Shell: "echo $$ > pid; exec sleep 300", Timeout: time.Hour})
		done <- err
	}()
	pidFile := filepath.Join(c.Workspace(sb.Pod()), "pid")
	var pid int
	for pid == 0 {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	for !pidGone(pid) {
		select {
		case <-t.Context().Done():
			t.Fatalf("process %d still runs", pid)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestStartStdinEOF: Start streams stdin and stdout; closing stdin is end of file
// (WebSocket v5 carries it; the helper's frames do too).
func TestStartStdinEOF(t *testing.T) {
	sb, _ := newSandbox(t, nil)
	p, err := sb.Start(t.Context(), rollout.Command{Shell: "cat; echo done"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(p.Stdin(), "hello\n"); err != nil {
		t.Fatal(err)
	}
	if err := p.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 || string(out) != "hello\ndone\n" {
		t.Fatalf("Wait = %+v, %v; stdout %q", res, err, out)
	}
}

// dieOn makes the fake answer a run whose argv mentions marker by setting the pod's
// status to st and ending the exec with no result frame, as a container killed
// mid-call does.
func dieOn(c *kubefake.Cluster, marker string, st corev1.PodStatus) {
	c.SetExecHook(func(pod string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, bool) {
		if len(argv) < 3 || argv[1] != podproto.OpRun || !strings.Contains(argv[2], marker) {
			return 0, false
		}
		if err := c.SetStatus(context.Background(), pod, st); err != nil {
			panic(err)
		}
		c.KillPod(pod)
		return 137, true
	})
}

func failedMain(reason string, code int32) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}}
}

// TestAgentEndsPod: what the agent's commands do to their pod is a result (scored),
// never an error; the rest of the sandbox says so too.
func TestAgentEndsPod(t *testing.T) {
	cases := []struct {
		name string
		st   corev1.PodStatus
		kind string
	}{
		{"OOM kill", failedMain("OOMKilled", 137), kube.EndMemory},
		{"storage eviction", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
			Message: "Pod ephemeral local storage usage exceeds the total limit of containers 4Gi."}, kube.EndStorage},
		{"deadline", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}, kube.EndDeadline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb, c := newSandbox(t, nil)
			dieOn(c, "agent-breaks-it", tc.st)
			res, err := sb.Run(t.Context(), rollout.Command{Shell: "echo agent-breaks-it"})
			if err != nil {
				t.Fatalf("Run = %v, want a result", err)
			}
			if res.ExitCode != 137 || !strings.Contains(string(res.Stderr), "the sandbox has ended") {
				t.Errorf("result %+v", res)
			}
			if sb.Ended() != tc.kind {
				t.Errorf("Ended = %q, want %q", sb.Ended(), tc.kind)
			}
			if res, err := sb.Run(t.Context(), rollout.Command{Shell: "true"}); err != nil || res.ExitCode != 137 {
				t.Errorf("next Run = %+v, %v", res, err)
			}
			if _, err := sb.ReadFile("x"); !errors.Is(err, kube.ErrSandboxEnded) {
				t.Errorf("ReadFile = %v, want ErrSandboxEnded", err)
			}
			if err := sb.Restore(t.Context()); err != nil {
				t.Errorf("Restore = %v, want nil", err)
			}
			p, err := sb.Start(t.Context(), rollout.Command{Shell: "cat"})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := p.Wait(); err != nil || res.ExitCode != 137 {
				t.Errorf("Start.Wait = %+v, %v", res, err)
			}
		})
	}
}

// TestPodLost: a pod that ends for a reason no command explains (the helper's idle
// exit, a node lost, someone deleting it) is the factory's error.
func TestPodLost(t *testing.T) {
	for name, st := range map[string]corev1.PodStatus{
		"idle exit": {Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}},
		"node pressure": {Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."},
	} {
		t.Run(name, func(t *testing.T) {
			sb, c := newSandbox(t, nil)
			dieOn(c, "lost-it", st)
			_, err := sb.Run(t.Context(), rollout.Command{Shell: "echo lost-it"})
			if !errors.Is(err, kube.ErrPodLost) || !errors.Is(err, podproto.ErrNoResult) {
				t.Fatalf("Run = %v, want ErrPodLost", err)
			}
			if sb.Ended() != "" {
				t.Errorf("Ended = %q", sb.Ended())
			}
		})
	}
}

// TestGroupConcurrent: a group's sandboxes start, run and close at once on one
// factory (one watch, many waiters).
func TestGroupConcurrent(t *testing.T) {
	f, c := newFactory(t, nil)
	const g = 16
	f.Prestart(t.Context(), rollout.SandboxSpec{}, g/2)
	errs := make(chan error, g)
	for i := range g {
		go func() {
			sb, err := f.NewSandbox(t.Context())
			if err != nil {
				errs <- err
				return
			}
			defer sb.Close()
			res, err := sb.Run(t.Context(), rollout.Command{Shell: "echo " + strconv.Itoa(i)})
			if err == nil && strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(i) {
				err = errors.New("stdout " + string(res.Stdout))
			}
			errs <- err
		}()
	}
	for range g {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// Prestarted pods no NewSandbox took stay in the pool until Close.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitPods(t, c, func(p []corev1.Pod) bool { return len(p) == 0 })
}

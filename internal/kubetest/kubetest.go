package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// PauseImage is the image containerd runs as every pod's sandbox, imported by cluster.sh up.
// Its one program, /pause, is cmd/kubetest-pause: tests may run it as a container too (its
// echo, cat, sleep, alloc and exit commands).
const PauseImage = "agenticopd.local/pause:3.10"

// RunCommand is the command, from the repository's root, that runs the cluster tests.
const RunCommand = `sudo env "PATH=$PATH" go test -count=1 ./internal/kubetest/... ./rollout/sandbox/kube/...`

const (
	// lockPath is the machine lock of cluster/lib.sh: one cluster per machine.
	lockPath = "/run/lock/agenticopd-kube.lock"
	// lockWait bounds the wait for another test process's cluster to be done with.
	lockWait = 25 * time.Minute
	// testOwner starts the owner a test process writes in the cluster's run directory.
	testOwner = "go test"
)

// Env is a running test cluster; its fields are read-only.
type Env struct {
	// Kubeconfig is the path of the admin's kubeconfig (a system:masters client
	// certificate), valid while the cluster runs.
	Kubeconfig string
	// Config is the admin's client configuration, read from Kubeconfig, with QPS 500 and
	// Burst 1000. Copy it (rest.CopyConfig) before changing it.
	Config *rest.Config
	// Work is the cluster's work directory (AGENTICOPD_KUBE_WORK, by default
	// /var/tmp/agenticopd-kube): binaries, build cache, the run's state and logs/.
	Work string
	// PauseProgram is the static program of [PauseImage], for tests that build images of
	// their own around it.
	PauseProgram string
	// Owner says who started the cluster: "go test: BINARY (pid N)" for a test process, or
	// what cluster.sh up wrote when started by hand. [Down] stops only the former.
	Owner string

	socket string // the node's containerd
}

// cluster is the process's one cluster: the lock it holds on the machine, and the guard that
// stops the cluster when the process ends, if the process started it. Cluster fills it, Down
// empties it; mu is held while they run (a start takes seconds, a cold build minutes, and
// every caller waits for it either way).
var cluster struct {
	mu      sync.Mutex
	env     *Env
	err     error // the start's error, given to every later Cluster until Down
	lock    *os.File
	guard   *exec.Cmd      // cluster.sh down-on-eof, when this process started the cluster
	guardIn io.WriteCloser // closing it makes the guard run down
}

// beforeUp is nil but in this package's tests, which set it to see the machine as it is after
// start took the lock and before it brings a cluster up.
var beforeUp func()

// Cluster returns the running test cluster, starting it on the process's first call (and on
// the first call after [Down]): it waits for the machine lock, builds the Kubernetes binaries
// unless they are cached (5-10 minutes on 2 cores the first time), starts the cluster (about
// 10 s) and returns it. A cluster started by hand (cluster.sh up) is used as it is. A failed
// start fails this test and every later caller's, with the scripts' output.
//
// Cluster skips the test when the process does not run as root, or when AGENTICOPD_KUBE is
// "off".
func Cluster(tb testing.TB) *Env {
	tb.Helper()
	if reason := skipReason(); reason != "" {
		tb.Skip(reason)
	}
	cluster.mu.Lock()
	defer cluster.mu.Unlock()
	if cluster.env == nil && cluster.err == nil {
		cluster.env, cluster.err = start(tb)
	}
	if cluster.err != nil {
		tb.Fatalf("kubetest: %v", cluster.err)
	}
	return cluster.env
}

func skipReason() string {
	if os.Getenv("AGENTICOPD_KUBE") == "off" {
		return "kubetest: AGENTICOPD_KUBE=off: no Kubernetes cluster"
	}
	if os.Geteuid() != 0 {
		return "kubetest: a Kubernetes cluster needs root; run the cluster tests with " + RunCommand
	}
	return ""
}

// Main runs m's tests, then [Down], and exits with the tests' status (1 if they passed
// but Down failed). Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Down(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "kubetest:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Down stops the cluster this process started, undoing every change it made to the machine
// (cluster.sh down), and releases the machine lock; a cluster started by hand is left
// running. It returns nil when there is nothing to stop. When ctx ends first, Down returns
// its error and the guard finishes the work; the lock stays held until it has.
func Down(ctx context.Context) error {
	cluster.mu.Lock()
	defer cluster.mu.Unlock()
	if cluster.lock == nil {
		cluster.env, cluster.err = nil, nil
		return nil
	}
	var err error
	if g := cluster.guard; g != nil {
		cluster.guardIn.Close()
		done := make(chan error, 1)
		go func() { done <- g.Wait() }()
		select {
		case err = <-done:
			if err != nil {
				err = fmt.Errorf("cluster.sh down: %w\n%s", err, tailFile(guardLog(workDir()), 30))
			}
		case <-ctx.Done():
			err = fmt.Errorf("cluster.sh down: %w (it goes on; see %s)", ctx.Err(), guardLog(workDir()))
		}
	}
	cluster.lock.Close()
	cluster.env, cluster.err, cluster.lock, cluster.guard, cluster.guardIn = nil, nil, nil, nil, nil
	return err
}

// start takes the machine lock and brings the cluster up, or finds it up.
func start(tb testing.TB) (*Env, error) {
	script, err := scriptPath()
	if err != nil {
		return nil, err
	}
	work := workDir()
	lock, err := takeLock(tb)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			lock.Close()
		}
	}()
	env := &Env{
		Kubeconfig:   filepath.Join(work, "run", "admin.kubeconfig"),
		Work:         work,
		PauseProgram: filepath.Join(work, "run", "images", "kubetest-pause"),
		socket:       filepath.Join(work, "run", "containerd", "containerd.sock"),
	}

	status, _ := runScript(lock, script, nil, "status")
	if owner, up := strings.CutPrefix(lineWith(status, "owner: "), "owner: "); up {
		if !strings.HasPrefix(owner, testOwner) {
			tb.Logf("kubetest: using the cluster started by %s", owner)
			env.Owner = owner
			if env.Config, err = restConfig(env.Kubeconfig); err != nil {
				return nil, err
			}
			cluster.lock, ok = lock, true
			return env, nil
		}
		// A cluster of a test process that ended without its guard's down: not ours to
		// trust, so it starts afresh.
		tb.Logf("kubetest: stopping the cluster %s left", owner)
		if out, err := runScript(lock, script, nil, "down"); err != nil {
			return nil, fmt.Errorf("cluster.sh down: %w\n%s", err, tail(out, 30))
		}
	}

	if beforeUp != nil {
		beforeUp()
	}
	guard, guardIn, err := startGuard(lock, script, work)
	if err != nil {
		return nil, err
	}
	cluster.guard, cluster.guardIn = guard, guardIn
	t0 := time.Now()
	owner := fmt.Sprintf("%s: %s (pid %d)", testOwner, filepath.Base(os.Args[0]), os.Getpid())
	env.Owner = owner
	out, err := runScript(lock, script, []string{"AGENTICOPD_KUBE_OWNER=" + owner}, "up")
	if err == nil {
		env.Config, err = restConfig(env.Kubeconfig)
	}
	if err != nil {
		guardIn.Close() // the guard undoes whatever up did
		guard.Wait()
		cluster.guard, cluster.guardIn = nil, nil
		return nil, fmt.Errorf("cluster.sh up: %w\n%s\n(logs: %s)", err, tail(out, 40), filepath.Join(work, "logs"))
	}
	tb.Logf("kubetest: cluster up in %.1fs: %s", time.Since(t0).Seconds(), strings.Join(lines(out, "kube: "), "; "))
	cluster.lock, ok = lock, true
	return env, nil
}

// restConfig reads the admin's kubeconfig, with client-side rate limits far above client-go's
// defaults (5 requests/s, bursts of 10): the cluster is the tests' own.
func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg, nil
}

// takeLock opens the machine lock and waits for it, saying who holds it while it waits.
func takeLock(tb testing.TB) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for said := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("the cluster lock %s: %w (held by pid %s)", lockPath, err, holder())
		}
		if !said {
			tb.Logf("kubetest: waiting for the cluster lock %s, held by pid %s", lockPath, holder())
			said = true
		}
		time.Sleep(time.Second)
	}
	os.WriteFile(lockPath+".pid", []byte(fmt.Sprintln(os.Getpid())), 0o644)
	return f, nil
}

func holder() string {
	b, _ := os.ReadFile(lockPath + ".pid")
	return strings.TrimSpace(string(b))
}

// startGuard starts cluster.sh down-on-eof in a process group of its own, holding the lock
// and reading a pipe only this process writes: when the pipe closes, by guardIn.Close or by
// this process's end, it runs down and then lets the lock go.
func startGuard(lock *os.File, script, work string) (*exec.Cmd, io.WriteCloser, error) {
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, nil, err
	}
	// Appended to: the guards of test processes that took turns, each under its own header.
	logf, err := os.OpenFile(guardLog(work), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "== guard of %s (pid %d), %s\n", filepath.Base(os.Args[0]), os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	g := exec.Command(script, "down-on-eof")
	g.Env = append(os.Environ(), "AGENTICOPD_KUBE_LOCK_FD=3")
	g.ExtraFiles = []*os.File{lock}
	g.Stdin, g.Stdout, g.Stderr = r, logf, logf
	g.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := g.Start(); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("cluster.sh down-on-eof: %w", err)
	}
	return g, w, nil
}

func guardLog(work string) string { return filepath.Join(work, "guard.log") }

// runScript runs cluster.sh with the lock this process holds and returns its output.
func runScript(lock *os.File, script string, env []string, args ...string) (string, error) {
	cmd := exec.Command(script, args...)
	cmd.Env = append(append(os.Environ(), "AGENTICOPD_KUBE_LOCK_FD=3"), env...)
	cmd.ExtraFiles = []*os.File{lock}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// scriptPath finds cluster/cluster.sh beside this file.
func scriptPath() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "cluster", "cluster.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the cluster scripts: %w (tests of this repository find them from the source tree)", err)
	}
	return p, nil
}

func workDir() string {
	if w := os.Getenv("AGENTICOPD_KUBE_WORK"); w != "" {
		return w
	}
	return "/var/tmp/agenticopd-kube"
}

func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func lines(s, prefix string) []string {
	var ls []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			ls = append(ls, strings.TrimPrefix(l, prefix))
		}
	}
	return ls
}

// tailFile is the last n lines of the file name.
func tailFile(name string, n int) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

package podproto_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// helperBin is the helper, built once by TestMain.
var helperBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "podproto-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helperBin = filepath.Join(dir, "agenticopd-pod")
	build := exec.Command("go", "build", "-o", helperBin, "github.com/agentic-opd/agenticopd/rollout/sandbox/kube/cmd/agenticopd-pod")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the helper: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// localExec is an Execer that runs the helper as a local subprocess, as an exec
// through the API server runs it in the pod: a cancelled ctx closes the streams
// (and, unless keepStdin, the helper's stdin: what WebSocket v4 cannot do) but does
// not kill the helper.
type localExec struct {
	env       []string
	keepStdin bool

	mu    sync.Mutex
	calls map[string]int
	pids  []int
	bg    sync.WaitGroup // helpers still running after their Exec returned
}

func newLocalExec(t testing.TB) *localExec {
	e := &localExec{env: append(os.Environ(), "AGENTICOPD_POD_STATE="+t.TempDir()), calls: map[string]int{}}
	t.Cleanup(e.bg.Wait)
	return e
}

func (e *localExec) count(op string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[op]
}

func (e *localExec) lastPID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pids) == 0 {
		return 0
	}
	return e.pids[len(e.pids)-1]
}

// gate passes writes on until it is shut, then drops them.
type gate struct {
	mu   sync.Mutex
	w    io.Writer
	shut bool
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *gate) close() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
}

func (e *localExec) Exec(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(argv) < 2 || argv[0] != podproto.HelperPath {
		return fmt.Errorf("localExec: unexpected argv %q", argv)
	}
	cmd := exec.Command(helperBin, argv[1:]...)
	cmd.Env = e.env
	outGate, errGate := &gate{w: stdout}, &gate{w: stderr}
	cmd.Stdout, cmd.Stderr = outGate, errGate
	var inW io.WriteCloser
	if stdin != nil {
		var err error
		if inW, err = cmd.StdinPipe(); err != nil {
			return err
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	e.mu.Lock()
	e.calls[argv[1]]++
	e.pids = append(e.pids, cmd.Process.Pid)
	e.mu.Unlock()
	var once sync.Once
	closeIn := func() {
		if inW != nil {
			once.Do(func() { inW.Close() })
		}
	}
	if stdin != nil {
		e.bg.Go(func() {
			_, _ = io.Copy(inW, stdin)
			closeIn()
		})
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		outGate.close()
		errGate.close()
		if !e.keepStdin {
			closeIn()
		}
		e.bg.Go(func() { <-done; closeIn() })
		return ctx.Err()
	}
}

// newClient is a client of a fresh workspace through a fresh local execer.
func newClient(t testing.TB, cfg podproto.Config) (*podproto.Client, *localExec, string) {
	t.Helper()
	e := newLocalExec(t)
	if cfg.Root == "" {
		cfg.Root = t.TempDir()
	}
	c, err := podproto.NewClient(e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, e, cfg.Root
}

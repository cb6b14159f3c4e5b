package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// Environment variables the helper reads (the pod spec sets them; tests too).
const (
	// envState is the directory of the helper's state: the activity file every
	// call touches and the registry of running commands. Default: agenticopd-pod
	// under the temporary directory.
	envState = "AGENTICOPD_POD_STATE"
	// envIdle is serve's idle time (a Go duration) when -idle is not given.
	envIdle = "AGENTICOPD_POD_IDLE"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches an op and returns the exit status: 0 when a result frame was
// written, 2 when it could not be.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: agenticopd-pod serve|install DIR|image -o FILE -tag NAME|OP REQUEST-JSON")
		return 2
	}
	op := args[0]
	switch op {
	case podproto.OpServe:
		return serve(args[1:], stderr)
	case podproto.OpInstall:
		return install(args[1:], stderr)
	case "image":
		return image(args[1:], stderr)
	}
	if len(args) != 2 {
		fmt.Fprintf(stderr, "agenticopd-pod %s: want one request argument\n", op)
		return 2
	}
	touchActivity()
	out := &frameOut{w: stdout}
	res := dispatch(op, []byte(args[1]), stdin, out)
	if err := out.result(res); err != nil {
		fmt.Fprintf(stderr, "agenticopd-pod %s: writing the result: %v\n", op, err)
		return 2
	}
	return 0
}

func dispatch(op string, raw []byte, stdin io.Reader, out *frameOut) podproto.Result {
	decode := func(v any) *podproto.Error {
		if err := json.Unmarshal(raw, v); err != nil {
			return &podproto.Error{Kind: podproto.KindInvalid, Op: op, Message: "bad request: " + err.Error()}
		}
		return nil
	}
	switch op {
	case podproto.OpRun:
		var req podproto.RunRequest
		if e := decode(&req); e != nil {
			return podproto.Result{Error: e}
		}
		return runCommand(req, stdin, out)
	case podproto.OpKill:
		var req podproto.KillRequest
		if e := decode(&req); e != nil {
			return podproto.Result{Error: e}
		}
		return killRuns(req)
	case podproto.OpRead:
		var req podproto.ReadRequest
		if e := decode(&req); e != nil {
			return podproto.Result{Error: e}
		}
		return readFile(req, out)
	case podproto.OpWrite:
		var req podproto.WriteRequest
		if e := decode(&req); e != nil {
			return podproto.Result{Error: e}
		}
		return writeFile(req, stdin)
	case podproto.OpStat:
		var req podproto.PathRequest
		if e := decode(&req); e != nil {
			return podproto.Result{Error: e}
		}
		return statFile(req)
	case podproto.OpReadDir:
		var req podproto.PathRequest
		if e := decode(&req); e != nil {
			return podproto.Result{Error: e}
		}
		return readDir(req, out)
	case podproto.OpRestore:
		var req podproto.RestoreRequest
		if e := decode(&req); e != nil {
			return podproto.Result{Error: e}
		}
		return restore(req)
	case podproto.OpSearch:
		var req podproto.SearchRequest
		if e := decode(&req); e != nil {
			return podproto.Result{Error: e}
		}
		return search(req, out)
	}
	return podproto.Result{Error: &podproto.Error{Kind: podproto.KindInvalid, Op: op, Message: "unknown op"}}
}

// frameOut writes frames to the helper's stdout, one write per frame, from any
// goroutine.
type frameOut struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (o *frameOut) frame(kind byte, payload []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for first := true; first || len(payload) > 0; first = false {
		n := min(len(payload), podproto.MaxFrame)
		o.buf = append(o.buf[:0], kind, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		o.buf = append(o.buf, payload[:n]...)
		if _, err := o.w.Write(o.buf); err != nil {
			return err
		}
		payload = payload[n:]
	}
	return nil
}

func (o *frameOut) result(r podproto.Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return o.frame(podproto.FrameResult, b)
}

// fail is a result carrying err, its kind read from the error.
func fail(op, path string, err error) podproto.Result {
	return podproto.Result{Error: &podproto.Error{Kind: kindOf(err), Op: op, Path: path, Message: err.Error()}}
}

// kindOf maps an error to its kind. A path error whose cause is not an errno is
// the root's own refusal (a path that escapes it): invalid.
func kindOf(err error) string {
	var pe *podproto.Error
	var errno syscall.Errno
	var pathErr *fs.PathError
	switch {
	case errors.As(err, &pe):
		return pe.Kind
	case errors.Is(err, fs.ErrNotExist):
		return podproto.KindNotExist
	case errors.Is(err, fs.ErrPermission):
		return podproto.KindPermission
	case errors.Is(err, fs.ErrExist):
		return podproto.KindExist
	case errors.Is(err, fs.ErrInvalid):
		return podproto.KindInvalid
	case errors.As(err, &errno):
		switch errno {
		case syscall.ENOTDIR:
			return podproto.KindNotDir
		case syscall.ELOOP, syscall.EXDEV:
			return podproto.KindInvalid
		case syscall.EISDIR:
			return podproto.KindNotRegular
		}
	case errors.As(err, &pathErr):
		return podproto.KindInvalid
	}
	return podproto.KindInternal
}

// stateDir is the helper's state directory.
func stateDir() string {
	if d := os.Getenv(envState); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "agenticopd-pod")
}

// touchActivity marks a call, for serve's idle exit.
func touchActivity() {
	dir := stateDir()
	p := filepath.Join(dir, "activity")
	now := time.Now()
	if err := os.Chtimes(p, now, now); err == nil {
		return
	}
	_ = os.MkdirAll(dir, 0o700)
	if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		_ = f.Close()
	}
}

// install copies the helper's own binary into dir (the init container's job).
func install(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: agenticopd-pod install DIR")
		return 2
	}
	if err := installTo(args[0]); err != nil {
		fmt.Fprintf(stderr, "agenticopd-pod install: %v\n", err)
		return 1
	}
	return 0
}

func installTo(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	src, err := os.Open(self)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".agenticopd-pod-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, filepath.Base(podproto.HelperPath)))
}

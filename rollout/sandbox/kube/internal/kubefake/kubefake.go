// Package kubefake is the no-cluster test harness of package kube: client-go's fake
// clientset for the API objects, a loopback TLS server that speaks the exec
// subprotocol (WebSocket v5.channel.k8s.io, with the same wsstream server code the
// kubelet's streaming path uses) and a "kubelet" that marks created pods Running and
// runs each exec of a pod as a local subprocess of the real helper binary, in a
// workspace directory of the pod's own.
//
// What it does not do: scheduling, image pulls, the garbage collector, field
// selectors, limits. A test scripts those through [Cluster.SetStart],
// [Cluster.SetStatus] and [Cluster.SetExecHook].
package kubefake

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// Namespace is the namespace tests use.
const Namespace = "sandboxes"

// StartFunc decides the status a created pod gets: return nil to leave it Pending.
type StartFunc func(p *corev1.Pod) *corev1.PodStatus

// ExecHook may answer an exec itself: handled false runs the helper as usual.
type ExecHook func(pod string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (exit int, handled bool)

// Cluster is the fake. Create it with [New]; it closes itself at the test's end.
type Cluster struct {
	Client *fake.Clientset
	REST   *rest.Config

	helper string
	srv    *httptest.Server
	base   string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	start  StartFunc
	hook   ExecHook
	ifaces []string
	pods   map[string]*podRT

	// Execs counts the exec requests served; Upgrades the WebSocket upgrades;
	// SPDY the requests that asked for an SPDY upgrade (the fake refuses them).
	Execs, Upgrades, SPDY atomic.Int64
	// refuseWS makes the fake answer WebSocket upgrades with 400, as a server
	// or proxy without WebSocket exec would.
	refuseWS atomic.Bool
}

// RefuseWebSocket makes the exec endpoint refuse WebSocket upgrades (true) or
// serve them (false).
func (c *Cluster) RefuseWebSocket(refuse bool) { c.refuseWS.Store(refuse) }

// podRT is a pod's local "container": its directories and running execs.
type podRT struct {
	dir   string // root of the pod's directories
	work  string // the pod's WorkingDir
	procs map[*exec.Cmd]io.Closer
}

// New starts the fake: helper is the path of a built agenticopd-pod.
func New(t testing.TB, helper string) *Cluster {
	c := &Cluster{
		Client: fake.NewClientset(),
		helper: helper,
		base:   t.TempDir(),
		pods:   map[string]*podRT{},
		ifaces: []string{"lo", "eth0"},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.srv = httptest.NewTLSServer(http.HandlerFunc(c.serveExec))
	c.REST = &rest.Config{
		Host: c.srv.URL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw}),
		},
	}
	w, err := c.Client.CoreV1().Pods(Namespace).Watch(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.wg.Go(func() { c.kubelet(w) })
	t.Cleanup(c.Close)
	return c
}

// Close stops the fake and kills what its pods run. It is idempotent.
func (c *Cluster) Close() {
	c.cancel()
	c.srv.Close()
	c.mu.Lock()
	for _, rt := range c.pods {
		for cmd, in := range rt.procs {
			_ = in.Close()
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// SetStart sets how created pods start (nil: Running at once).
func (c *Cluster) SetStart(f StartFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.start = f
}

// SetExecHook sets a hook that may answer execs itself.
func (c *Cluster) SetExecHook(h ExecHook) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hook = h
}

// SetInterfaces sets what /sys/class/net holds in every pod (default lo, eth0).
func (c *Cluster) SetInterfaces(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ifaces = names
}

// Running is the status of a pod whose main container runs.
func Running() *corev1.PodStatus {
	return &corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "helper", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "sandbox", Ready: true, State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{}}}},
	}
}

// SetStatus sets a pod's status, as a kubelet would.
func (c *Cluster) SetStatus(ctx context.Context, name string, st corev1.PodStatus) error {
	p, err := c.Client.CoreV1().Pods(Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	p.Status = st
	_, err = c.Client.CoreV1().Pods(Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

// KillPod kills every process of a pod's execs, as a container's end would.
func (c *Cluster) KillPod(name string) { c.stopPod(name) }

// Pods lists the pods in the fake's namespace.
func (c *Cluster) Pods(ctx context.Context) ([]corev1.Pod, error) {
	l, err := c.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// Workspace is the local directory of a pod's workspace.
func (c *Cluster) Workspace(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rt := c.pods[name]; rt != nil {
		return filepath.Join(rt.dir, "fs", rt.work)
	}
	return ""
}

// kubelet gives created pods their status and kills what deleted pods ran.
func (c *Cluster) kubelet(w watch.Interface) {
	defer w.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			p, _ := ev.Object.(*corev1.Pod)
			if p == nil {
				continue
			}
			switch ev.Type {
			case watch.Added:
				c.addPod(p)
			case watch.Deleted:
				c.stopPod(p.Name)
			}
		}
	}
}

func (c *Cluster) addPod(p *corev1.Pod) {
	dir := filepath.Join(c.base, p.Name)
	work := "/"
	if len(p.Spec.Containers) > 0 && p.Spec.Containers[0].WorkingDir != "" {
		work = p.Spec.Containers[0].WorkingDir
	}
	c.mu.Lock()
	ifaces := c.ifaces
	start := c.start
	c.mu.Unlock()
	for _, d := range []string{filepath.Join(dir, "fs", work), filepath.Join(dir, "state"), filepath.Join(dir, "fs", "sys", "class", "net")} {
		_ = os.MkdirAll(d, 0o755)
	}
	for _, n := range ifaces {
		_ = os.WriteFile(filepath.Join(dir, "fs", "sys", "class", "net", n), nil, 0o644)
	}
	c.mu.Lock()
	c.pods[p.Name] = &podRT{dir: dir, work: work, procs: map[*exec.Cmd]io.Closer{}}
	c.mu.Unlock()
	st := Running()
	if start != nil {
		st = start(p)
	}
	if st != nil {
		_ = c.SetStatus(c.ctx, p.Name, *st)
	}
}

// stopPod ends a pod's execs: their stdin ends without its end frame (the helper
// kills its command's tree), then, a moment later, what is left is killed.
func (c *Cluster) stopPod(name string) {
	c.mu.Lock()
	rt := c.pods[name]
	var procs []*exec.Cmd
	if rt != nil {
		for cmd, in := range rt.procs {
			procs = append(procs, cmd)
			_ = in.Close()
		}
	}
	c.mu.Unlock()
	for _, cmd := range procs {
		c.wg.Go(func() {
			t := time.NewTimer(2 * time.Second)
			defer t.Stop()
			select {
			case <-t.C:
			case <-c.ctx.Done():
			}
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		})
	}
}

// serveExec is the API server's exec endpoint:
// /api/v1/namespaces/NS/pods/NAME/exec?command=...&stdin=...&container=...
func (c *Cluster) serveExec(w http.ResponseWriter, r *http.Request) {
	c.Execs.Add(1)
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 7 || parts[0] != "api" || parts[1] != "v1" || parts[2] != "namespaces" || parts[4] != "pods" || parts[6] != "exec" {
		writeStatus(w, apierrors.NewNotFound(corev1.Resource("pods"), r.URL.Path))
		return
	}
	name := parts[5]
	q := r.URL.Query()
	argv := q["command"]
	p, err := c.Client.CoreV1().Pods(parts[3]).Get(r.Context(), name, metav1.GetOptions{})
	if err != nil {
		writeStatus(w, apierrors.NewNotFound(corev1.Resource("pods"), name))
		return
	}
	c.mu.Lock()
	rt := c.pods[name]
	hook := c.hook
	c.mu.Unlock()
	if rt == nil || p.Status.Phase != corev1.PodRunning || q.Get("container") != "sandbox" || len(argv) == 0 {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("pod %s: container %q is not running", name, q.Get("container"))))
		return
	}
	if strings.HasPrefix(strings.ToLower(r.Header.Get("Upgrade")), "spdy") {
		c.SPDY.Add(1)
	}
	if !wsstream.IsWebSocketRequest(r) || c.refuseWS.Load() {
		writeStatus(w, apierrors.NewBadRequest("this fake speaks only WebSocket exec"))
		return
	}
	wantIn := q.Get("stdin") == "true"
	channels := []wsstream.ChannelType{wsstream.IgnoreChannel, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.ReadChannel}
	if wantIn {
		channels[0] = wsstream.ReadChannel
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		remotecommand.StreamProtocolV5Name: {Binary: true, Channels: channels},
		remotecommand.StreamProtocolV4Name: {Binary: true, Channels: channels},
	})
	conn.SetIdleTimeout(time.Hour)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		return
	}
	c.Upgrades.Add(1)
	defer conn.Close()
	_, _ = streams[remotecommand.StreamStdOut].Write(nil)
	var stdin io.ReadCloser = io.NopCloser(strings.NewReader(""))
	if wantIn {
		stdin = streams[remotecommand.StreamStdIn]
	}
	exit := -1
	if hook != nil {
		if code, ok := hook(name, argv, stdin, streams[remotecommand.StreamStdOut], streams[remotecommand.StreamStdErr]); ok {
			exit = code
		}
	}
	if exit < 0 {
		exit = c.runHelper(rt, argv, stdin, streams[remotecommand.StreamStdOut], streams[remotecommand.StreamStdErr])
	}
	st := metav1.Status{Status: metav1.StatusSuccess}
	if exit != 0 {
		st = metav1.Status{Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %d", exit),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: fmt.Sprint(exit)}}}}
	}
	b, _ := json.Marshal(st)
	_, _ = streams[remotecommand.StreamErr].Write(b)
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}

// runHelper runs argv (the helper's path first) as a local subprocess, with the
// request's absolute paths mapped into the pod's directory.
func (c *Cluster) runHelper(rt *podRT, argv []string, stdin io.ReadCloser, stdout, stderr io.Writer) int {
	args := append([]string(nil), argv[1:]...)
	if len(args) == 2 {
		args[1] = mapRoot(args[1], filepath.Join(rt.dir, "fs"))
	}
	cmd := exec.Command(c.helper, args...)
	cmd.Dir = filepath.Join(rt.dir, "fs", rt.work)
	cmd.Env = append(os.Environ(), "AGENTICOPD_POD_STATE="+filepath.Join(rt.dir, "state"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pin, err := cmd.StdinPipe()
	if err != nil {
		return 126
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, err)
		return 126
	}
	c.mu.Lock()
	rt.procs[cmd] = pin
	c.mu.Unlock()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(pin, stdin)
		_ = pin.Close()
	}()
	err = cmd.Wait()
	_ = stdin.Close()
	c.mu.Lock()
	delete(rt.procs, cmd)
	c.mu.Unlock()
	<-copied
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return 126
	}
	return 0
}

// mapRoot rewrites the "root" of a request to the pod's directory under fsRoot.
func mapRoot(req, fsRoot string) string {
	var m map[string]any
	if json.Unmarshal([]byte(req), &m) != nil {
		return req
	}
	root, ok := m["root"].(string)
	if !ok || !strings.HasPrefix(root, "/") {
		return req
	}
	m["root"] = filepath.Join(fsRoot, root)
	b, err := json.Marshal(m)
	if err != nil {
		return req
	}
	return string(b)
}

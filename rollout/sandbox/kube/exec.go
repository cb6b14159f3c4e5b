package kube

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// execer opens exec streams to the main container of the factory's pods through the
// API server: WebSocket v5.channel.k8s.io (stdin end of file and all), falling back
// to SPDY where the server refuses the WebSocket upgrade. It is the only way the
// library reaches a pod.
type execer struct {
	rest      *rest.Config
	core      rest.Interface // builds the exec URLs; makes no request
	namespace string
	sem       *semaphore.Weighted
}

// newExecer prepares exec streams with cfg. It does no I/O.
func newExecer(cfg *rest.Config, namespace string, maxExecs int) (*execer, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	core, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, configError("REST: %v", err)
	}
	return &execer{rest: cfg, core: core, namespace: namespace, sem: semaphore.NewWeighted(int64(maxExecs))}, nil
}

// pod returns the [podproto.Execer] of one pod.
func (e *execer) pod(name string) podproto.Execer {
	return podproto.ExecFunc(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
		return e.exec(ctx, name, argv, stdin, stdout, stderr)
	})
}

// exec runs argv in pod's main container and copies its streams. It returns when
// the command's streams have ended or ctx has ended (the stream is then closed; the
// command may go on in the pod). A non-zero exit status is an error too (client-go's
// exec.CodeExitError); podproto's client reads only the result frame.
func (e *execer) exec(ctx context.Context, pod string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := e.sem.Acquire(ctx, 1); err != nil {
		return err
	}
	defer e.sem.Release(1)
	u := e.core.Post().Namespace(e.namespace).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: ContainerName,
			Command:   argv,
			Stdin:     stdin != nil,
			Stdout:    stdout != nil,
			Stderr:    stderr != nil,
		}, scheme.ParameterCodec).URL()
	ws, err := remotecommand.NewWebSocketExecutor(e.rest, "GET", u.String())
	if err != nil {
		return fmt.Errorf("kube: exec in %s: %w", pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.rest, "POST", u)
	if err != nil {
		return fmt.Errorf("kube: exec in %s: %w", pod, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("kube: exec in %s: %w", pod, err)
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return fmt.Errorf("kube: exec in %s: %w", pod, err)
	}
	return nil
}

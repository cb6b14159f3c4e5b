package kube_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/agentic-opd/agenticopd/internal/kubetest"
)

// helperBin is the agenticopd-pod binary TestMain builds for the fake cluster.
var helperBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kube-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// client-go and the exec server log broken streams through klog; the tests
	// break streams on purpose.
	klog.SetLogger(logr.Discard())
	helperBin = filepath.Join(dir, "agenticopd-pod")
	build := exec.Command("go", "build", "-o", helperBin, "github.com/agentic-opd/agenticopd/rollout/sandbox/kube/cmd/agenticopd-pod")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the helper: %v\n%s", err, out)
		os.Exit(1)
	}
	code := 0
	func() {
		defer os.RemoveAll(dir)
		code = m.Run()
		// Stops the real cluster if this process started one (cluster_test.go).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := kubetest.Down(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "kubetest:", err)
			if code == 0 {
				code = 1
			}
		}
	}()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
			// client-go's WebSocket heartbeat ends at its next tick after the stream.
			goleak.IgnoreTopFunction("k8s.io/client-go/tools/remotecommand.(*heartbeat).start"),
			// client-go's process-wide TLS transport cache rotates client
			// certificates (the real cluster's kubeconfig) in goroutines it never
			// stops.
			goleak.IgnoreAnyFunction("k8s.io/client-go/transport.(*dynamicClientCert).run"),
			goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"),
			goleak.IgnoreAnyFunction("k8s.io/client-go/util/workqueue.(*Typed[...]).Get"),
			goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntil"),
			goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/util/wait.PollImmediateUntilWithContext.poller.func1.1"),
			// Its cached transports keep HTTP/2 connections to the real API
			// server (x/net's, which http.Transport.CloseIdleConnections does not
			// reach).
			goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

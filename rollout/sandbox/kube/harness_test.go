package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/internal/kubefake"
)

// testImage is the image of function-level sandboxes in tests (a local name; the
// fake pulls nothing).
const testImage = "agenticopd.local/python:test"

// baseConfig is a factory's Config on the fake cluster c.
func baseConfig(c *kubefake.Cluster) kube.Config {
	return kube.Config{
		REST:               c.REST,
		Client:             c.Client,
		Namespace:          kubefake.Namespace,
		HelperImage:        "agenticopd.local/agenticopd-pod:test",
		Image:              testImage,
		TrustNetworkPolicy: true,
		StartTimeout:       time.Minute,
	}
}

// newFactory makes a factory on a fresh fake cluster, closed at the test's end.
func newFactory(t testing.TB, mod func(*kube.Config)) (*kube.Factory, *kubefake.Cluster) {
	t.Helper()
	c := kubefake.New(t, helperBin)
	cfg := baseConfig(c)
	if mod != nil {
		mod(&cfg)
	}
	f, err := kube.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("kube.New: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("Factory.Close: %v", err)
		}
	})
	return f, c
}

// newSandboxTB is a sandbox of a fresh fake cluster's factory, for benchmarks.
func newSandboxTB(tb testing.TB) (*kube.Sandbox, *kubefake.Cluster) {
	tb.Helper()
	f, c := newFactory(tb, nil)
	sb, err := f.NewSandbox(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sb.Close() })
	return sb.(*kube.Sandbox), c
}

package kube_test

import (
	"testing"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/rollouttest"
)

func TestConformanceFake(t *testing.T) {
	f, _ := newFactory(t, nil)
	rollouttest.Run(t, func(t *testing.T) rollout.Sandbox {
		sb, err := f.NewSandbox(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return sb
	})
}

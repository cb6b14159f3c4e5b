package kube_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// realToyImage is the toy repository image of testdata/swe, imported under a local
// name.
const realToyImage = "agenticopd.local/swe-toy:1"

// TestClusterRepoTask grades the toy repository tasks in pods of the task's image:
// the gold patch resolves, no patch does not (the rollout's pod and a fresh grading
// pod of one image, through rollout.SpecFactory only).
func TestClusterRepoTask(t *testing.T) {
	env := realCluster(t)
	ctx := t.Context()
	ref, err := name.ParseReference(imagestest.SWERef(t))
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Import(ctx, img, realToyImage); err != nil {
		t.Fatal(err)
	}
	f := realFactory(t, nil)
	ts, err := tasks.LoadSWE(filepath.Join("..", "..", "..", "testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	if err != nil {
		t.Fatal(err)
	}
	task := ts[0]
	task.Repo.Image = realToyImage
	spec := rollout.SandboxSpec{Image: task.Repo.Image, WorkDir: task.Repo.Dir(), Network: task.Repo.Network}
	fresh := rollout.SandboxFactoryFunc(func(ctx context.Context) (rollout.Sandbox, error) {
		return f.NewSandboxFor(ctx, spec)
	})
	for _, tc := range []struct {
		name  string
		patch string
		rule  reward.Rule
	}{
		{"gold", reward.PatchGold, reward.RuleResolved},
		{"empty", reward.PatchEmpty, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := reward.VerifyPatch(ctx, fresh, task, tc.patch, reward.RepoOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("C %.2f, rule %s: %s", v.Correctness, v.Rule, v.Reason)
			if (tc.rule == reward.RuleResolved) != (v.Rule == reward.RuleResolved) {
				t.Errorf("rule %s, want resolved %v", v.Rule, tc.rule == reward.RuleResolved)
			}
		})
	}
}

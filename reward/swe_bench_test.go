package reward_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/tasks"
)

// BenchmarkVerifyPatchGold grades the toy task "add" with its gold patch in the image
// sandbox: one sandbox for the change, one for grading (the image cached after the
// first pull), git, the test patch and pytest. It reports seconds per grading.
func BenchmarkVerifyPatchGold(b *testing.B) {
	fresh := newToyFactory(b)
	ts, err := tasks.LoadSWE(filepath.Join("..", "testdata", "swe", "tasks.jsonl"), tasks.SWEConfig{})
	require.NoError(b, err)
	ctx := context.Background()
	_, err = reward.VerifyPatch(ctx, fresh, ts[0], reward.PatchGold, reward.RepoOptions{}) // pull and unpack once
	require.NoError(b, err)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		v, err := reward.VerifyPatch(ctx, fresh, ts[0], reward.PatchGold, reward.RepoOptions{})
		require.NoError(b, err)
		require.Equal(b, reward.RuleResolved, v.Rule)
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/grading")
}

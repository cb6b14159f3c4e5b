package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/internal/printcheck"
)

func TestPrintMetricsPrintsNoFloatNoise(t *testing.T) {
	var sb strings.Builder
	cli.PrintMetrics(&sb, map[string]float64{
		"train/mean_reward":     (0.7 + 0.85 + 0.9 + 0.855) / 4, // 0.8262499999999998 in binary
		"opd/hint_rate":         0.1 + 0.2,                      // 0.30000000000000004
		"requests/generate":     123456789,
		"train/total_rollouts":  8,
		"opd/mean_turns_scored": 2.0 / 3,
	}, 24)
	out := sb.String()
	assert.Empty(t, printcheck.FloatNoise(out), out)
	for _, want := range []string{
		"  train/mean_reward        0.82625\n",
		"  opd/hint_rate            0.3\n",
		"  requests/generate        123456789\n",
		"  train/total_rollouts     8\n",
		"  opd/mean_turns_scored    0.666667\n",
	} {
		assert.Contains(t, out, want)
	}
}

func TestFigure(t *testing.T) {
	for in, want := range map[float64]float64{
		0.8262499999999998:  0.82625,
		0.30000000000000004: 0.3,
		1e15 + 1:            1e15 + 1,
		-0.1 - 0.2:          -0.3,
		0.000123456789:      0.000123457,
	} {
		assert.Equal(t, want, cli.Figure(in), "%v", in)
	}
}

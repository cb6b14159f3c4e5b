package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/agentic-opd/agenticopd/examples/internal/clitest"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/judge/judgetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRuleJudgeConforms(t *testing.T) {
	judgetest.Run(t, func() judge.Judge { return judge.Func(ruleJudge) })
}

func TestCustomRolesUsesTheFrozenTeacher(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-out", t.TempDir(), "-groups", "1"}, &out), out.String())
	first, _, _ := strings.Cut(out.String(), "\n")
	assert.True(t, strings.HasPrefix(first, "SIMULATOR"), first)
	assert.Contains(t, out.String(), "teacher requests: policy server 0, frozen teacher 1")
}

func TestCustomRolesFlags(t *testing.T) {
	clitest.CheckFlags(t, run, []string{"out", "groups", "topk"},
		[]clitest.BadLine{clitest.Bad("groups", "-groups", "0"), clitest.Bad("topk", "-topk", "x")})
}

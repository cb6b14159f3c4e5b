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
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"

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
	assert.Contains(t, out.String(), "teacher requests: policy server 0, frozen teacher 2",
		"the top-K check at start-up and the group's scoring request, both at the frozen teacher")
}

func TestCustomRolesFlags(t *testing.T) {
	clitest.CheckFlags(t, run, []string{"out", "groups", "topk", "vllm-url", "model", "teacher-url"},
		[]clitest.BadLine{clitest.Bad("groups", "-groups", "0"), clitest.Bad("topk", "-topk", "x"),
			clitest.Bad("vllm-url", "-vllm-url", "localhost:8000"), clitest.Bad("teacher-url", "-teacher-url", "ftp://x")})
}

// TestCustomRolesAgainstAServer runs the program as against a real server: -vllm-url
// (here another simulator, standing in for vLLM) plays the policy and, without
// -teacher-url, the teacher, whose --max-logprobs is checked against -topk first.
func TestCustomRolesAgainstAServer(t *testing.T) {
	srv := vllmtest.NewServer(t, vllmtest.WithAgentScript((&scripted.Student{}).Turn), vllmtest.WithMaxLogprobs(20))
	var out bytes.Buffer
	err := run(context.Background(), []string{"-out", t.TempDir(), "-vllm-url", srv.URL, "-topk", "21"}, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-topk 21: must be at most 20")

	out.Reset()
	require.NoError(t, run(context.Background(), []string{"-out", t.TempDir(), "-vllm-url", srv.URL, "-topk", "20"}, &out), out.String())
	assert.True(t, strings.HasPrefix(out.String(), "vLLM server: "+srv.URL), out.String())
	assert.Contains(t, out.String(), "group ")
	assert.Positive(t, srv.RequestCount("/v1/completions"), "the rollouts ran against the server")
}

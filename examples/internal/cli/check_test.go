package cli_test

import (
	"bytes"
	"context"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func TestParsePrintsNothingOnError(t *testing.T) {
	var out bytes.Buffer
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(&out)
	fs.Int("groups", 1, "groups")
	err := cli.Parse(fs, []string{"-groups", "many"})
	require.Error(t, err)
	assert.Empty(t, out.String(), "the error is returned, to be printed once by Main")
	assert.Contains(t, err.Error(), `invalid value "many" for flag -groups`)

	require.ErrorIs(t, cli.Parse(fs, []string{"-h"}), flag.ErrHelp)
	assert.Contains(t, out.String(), "-groups int", "-h prints the usage")
}

func TestURL(t *testing.T) {
	for v, want := range map[string]string{
		"":                      "",
		"http://localhost:8000": "",
		"https://h.example/v1":  "",
		"localhost:8000":        "-api localhost:8000: must be a URL with its scheme, like http://localhost:8000",
		"127.0.0.1:9001":        "-api 127.0.0.1:9001: must be a URL with its scheme, like http://127.0.0.1:9001",
		"ftp://h":               "-api ftp://h: must be an http:// or https:// URL with a host",
		"http://":               "-api http://: must be an http:// or https:// URL with a host",
	} {
		err := cli.URL("api", v)
		if want == "" {
			assert.NoError(t, err, v)
			continue
		}
		require.Error(t, err, v)
		assert.Equal(t, want, err.Error())
		assert.Equal(t, 2, cli.ExitCode(err))
	}
}

func TestHFTokenFromTheEnvironment(t *testing.T) {
	t.Setenv(cli.HFTokenEnv, "hf_env")
	assert.Equal(t, "hf_env", cli.HFToken(""))
	assert.Equal(t, "hf_flag", cli.HFToken("hf_flag"), "the flag wins")
}

func TestCheckTopKAgainstTheServersMaxLogprobs(t *testing.T) {
	sim := vllmtest.NewServer(t, vllmtest.WithMaxLogprobs(20))
	c := sim.Client()
	require.NoError(t, cli.CheckTopK(context.Background(), c, "topk", 20))
	err := cli.CheckTopK(context.Background(), c, "topk", 21)
	require.Error(t, err)
	assert.Equal(t, "-topk 21: must be at most 20, the --max-logprobs of the teacher server at "+c.BaseURL()+
		" (or start that server with --max-logprobs 21 or more)", err.Error())
	assert.Equal(t, 2, cli.ExitCode(err))
}

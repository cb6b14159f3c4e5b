package agenticopd_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

var taskRE = regexp.MustCompile(`Say that task (\d+) is done`)

// TestProcessWritesGroupsInDrawOrder: the first task's group finishes last (its
// rollouts wait until another group was collected), yet Process writes the groups in
// the order their tasks were drawn, and calls OnGroup in that order.
func TestProcessWritesGroupsInDrawOrder(t *testing.T) {
	var env *agenticopd.Env
	answer := answerScript("order")
	sim := vllmtest.NewServer(t, vllmtest.WithAgentScript(func(in vllmtest.ScriptInput) (string, bool) {
		if strings.Contains(in.Messages[len(in.Messages)-1].Content, "task 1 is done") {
			for env.Metrics()["env/groups"] < 1 { // another group is done
				time.Sleep(time.Millisecond)
			}
		}
		return answer(in)
	}))
	var order []string
	env = fastEnv(t, sim.Client(), func(c *agenticopd.Config) {
		c.MaxGroups = 2
		c.OnGroup = func(g *agenticopd.Group) { order = append(order, g.Task.ID) }
	})
	var out strings.Builder
	require.NoError(t, env.Process(context.Background(), 3, &out))
	assert.Equal(t, []string{"say-1", "say-2", "say-3"}, order, "OnGroup in draw order")
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var g struct {
			Messages [][]struct{ Content string } `json:"messages"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &g))
		require.NotEmpty(t, g.Messages)
		for _, m := range g.Messages[0] {
			if sm := taskRE.FindStringSubmatch(m.Content); sm != nil {
				lines = append(lines, "say-"+sm[1])
				break
			}
		}
	}
	assert.Equal(t, []string{"say-1", "say-2", "say-3"}, lines, "lines in draw order")
}

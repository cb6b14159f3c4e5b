package scorertest_test

import (
	"fmt"

	"github.com/agentic-opd/agenticopd/scorer/scorertest"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// TestScorer checks a teacher against the LogprobScorer contract: here the vLLM
// client, on the simulator.
func ExampleTestScorer() {
	sim, err := vllmtest.Start(vllmtest.WithMaxLogprobs(20))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sim.Close()
	fmt.Println(scorertest.TestScorer(sim.Client()))
	// Output: <nil>
}

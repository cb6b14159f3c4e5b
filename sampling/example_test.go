package sampling_test

import (
	"fmt"

	"github.com/agentic-opd/agenticopd/sampling"
)

// Every field is stated on the wire, with the zero values resolved to "off", and
// Mismatches names the settings under which a server's reported logprobs are not
// those of the distribution sampled.
func ExampleParams() {
	p := sampling.Params{Temperature: 1}
	m := p.Map()
	for i, f := range sampling.Fields {
		if i > 0 {
			fmt.Print(" ")
		}
		fmt.Printf("%s=%v", f, m[f])
	}
	fmt.Println()
	fmt.Println(len(p.Mismatches()))
	fmt.Println(sampling.Params{Temperature: 0.6, TopK: 20, TopP: 0.95}.Mismatches())
	// Output:
	// temperature=1 top_p=1 top_k=-1 min_p=0 repetition_penalty=1 presence_penalty=0 frequency_penalty=0
	// 0
	// [temperature 0.6 top_p 0.95 top_k 20]
}

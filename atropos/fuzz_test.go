package atropos_test

import (
	"encoding/json"
	"testing"

	"github.com/agentic-opd/agenticopd/atropos"
)

// FuzzDecodeGroup checks that the decoder never panics, that whatever it accepts is
// valid JSON for encoding/json as well, and that decode∘encode is stable.
func FuzzDecodeGroup(f *testing.F) {
	golden, err := goldenGroup(f).MarshalJSON()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add([]byte(`{"tokens":[[1]],"masks":[[1]],"scores":[1]}`))
	f.Add([]byte(`{"tokens":[[1,2]],"masks":[[-100,2]],"scores":[0.5],"distill_token_ids":[[[],[3,4]]],"distill_logprobs":[[[],[-0.1,-2]]]}`))
	f.Add([]byte(`{"tokens":[[1.0]],"masks":[[1]],"scores":[1e-7],"messages":[[{"role":"u","content":[{"a":"\u00e9"}]}]],"x":{"y":[null,true]}}`))
	f.Add([]byte(`{"tokens":[[1]],"masks":[[1]],"scores":[NaN]}`))
	f.Add([]byte(`{"tokens":[[1]],"masks":[[1]],"scores":[1],"z":5,"y":"s"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var g atropos.ScoredDataGroup
		if err := g.UnmarshalJSON(data); err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		enc, err := g.MarshalJSON()
		if err != nil {
			t.Fatalf("re-encoding an accepted group: %v", err)
		}
		var back atropos.ScoredDataGroup
		if err := back.UnmarshalJSON(enc); err != nil {
			t.Fatalf("decoding our own encoding %q: %v", enc, err)
		}
		enc2, err := back.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(enc) != string(enc2) {
			t.Fatalf("unstable encoding:\n%s\n%s", enc, enc2)
		}
	})
}

package atropos

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// TestNumbersMatchEncodingJSON checks the writers of integer and float lists against
// encoding/json, around the edges of their shorter paths: ints that do and do not fit
// an int32, and float64s that are integers below and above 2^53, negative zero among
// them.
func TestNumbersMatchEncodingJSON(t *testing.T) {
	ints := []int{0, 1, -1, -100, 151643, 99_999_999, 100_000_000, math.MaxInt32, math.MinInt32,
		math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64, math.MinInt64}
	floats := []float64{0, math.Copysign(0, -1), 1, -1, MaskedLogprob, 1e15, -1e15, 1 << 52,
		1<<53 - 1, -(1<<53 - 1), 1 << 53, 1<<53 + 2, 1e20, 1e21, 0.5, -0.1, 1e-7, math.MaxFloat64}
	rng := rand.New(rand.NewPCG(29, 1))
	for range 10_000 {
		ints = append(ints, int(rng.Int64())>>rng.IntN(64))
		f := math.Ldexp(rng.Float64(), rng.IntN(140)-70)
		floats = append(floats, f, math.Trunc(f), -math.Trunc(f))
	}
	var jw jsonWriter
	jw.intMatrix([][]int{ints})
	want, err := json.Marshal([][]int{ints})
	if err != nil {
		t.Fatal(err)
	}
	if string(jw.buf) != string(want) {
		t.Errorf("intMatrix wrote %.200s…, encoding/json %.200s…", jw.buf, want)
	}
	jw.buf = jw.buf[:0]
	if err := jw.floats(floats, "floats", -1); err != nil {
		t.Fatal(err)
	}
	if want, err = json.Marshal(floats); err != nil {
		t.Fatal(err)
	}
	if string(jw.buf) != string(want) {
		t.Errorf("floats wrote %.200s…, encoding/json %.200s…", jw.buf, want)
	}
}

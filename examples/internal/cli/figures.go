package cli

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
)

// Figure is v as the programs print it: rounded to 6 significant digits, so that a
// mean or a rate computed in binary floating point (0.8262499999999998) prints as the
// decimal it stands for (0.82625). Whole numbers (counts) are kept exactly.
func Figure(v float64) float64 {
	if v == math.Trunc(v) || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	if err != nil {
		return v // FormatFloat's output always parses
	}
	return r
}

// Figures is [Figure] of each of vs, in a new slice.
func Figures(vs []float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = Figure(v)
	}
	return out
}

// PrintMetrics writes m to w sorted by name, one line each: two spaces, the name
// padded to width, and its [Figure].
func PrintMetrics(w io.Writer, m map[string]float64, width int) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(w, "  %-*s %s\n", width, k, strconv.FormatFloat(Figure(m[k]), 'f', -1, 64))
	}
}

// Package stats holds small statistics over float64 samples.
package stats

import (
	"errors"
	"math"
	"sort"
)

// ErrEmpty is returned for a sample with no values.
var ErrEmpty = errors.New("stats: empty sample")

// Mean returns the arithmetic mean of xs.
func Mean(xs []float64) (float64, error) {
	if len(xs) == 0 {
		return math.NaN(), ErrEmpty
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs)), nil
}

// Median returns the median of xs, leaving xs as it is.
func Median(xs []float64) (float64, error) {
	if len(xs) == 0 {
		return math.NaN(), ErrEmpty
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2], nil
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, nil
}

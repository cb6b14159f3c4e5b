package stats

import (
	"errors"
	"fmt"
	"testing"
)

func TestMean(t *testing.T) {
	got, err := Mean([]float64{1, 2, 3, 4})
	if err != nil || got != 2.5 {
		t.Errorf("Mean = %v, %v; want 2.5, nil", got, err)
	}
	if _, err := Mean(nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("Mean(nil) error = %v, want ErrEmpty", err)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		t.Run(fmt.Sprint(len(tc.in)), func(t *testing.T) {
			if got, err := Median(tc.in); err != nil || got != tc.want {
				t.Errorf("Median(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

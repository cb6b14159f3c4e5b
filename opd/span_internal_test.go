package opd

import (
	"strings"
	"testing"
)

// The id check runs at every position of a span, not only the first: the public API
// cannot reach a wrong id (teacher sequences are built from the student's ids), so the
// check is tested here directly.
func TestCheckSpanEveryPosition(t *testing.T) {
	student := []int32{10, 11, 12, 13, 14, 15}
	sampled := []bool{false, false, true, true, true, false}
	// The teacher holds a 2-token hint before position 2.
	teacher := []int32{10, 11, 90, 91, 12, 13, 14}
	s := span{studentStart: 2, teacherStart: 4, n: 3}
	if got := checkSpan(student, sampled, teacher, s); got != "" {
		t.Fatalf("aligned span: %q, want no mismatch", got)
	}
	tests := []struct {
		name    string
		teacher []int32
		span    span
		want    string
	}{
		{"wrong id at the last position", []int32{10, 11, 90, 91, 12, 13, 99}, s, "teacher position 6 holds id 99, student position 4 holds id 14"},
		{"wrong id in the middle", []int32{10, 11, 90, 91, 12, 98, 14}, s, "teacher position 5 holds id 98"},
		{"shifted by one", teacher, span{studentStart: 2, teacherStart: 3, n: 3}, "teacher position 3 holds id 91"},
		{"past the teacher sequence", teacher[:6], s, "teacher position 6 is outside [1, 6)"},
		{"position 0", []int32{12, 13, 14}, span{studentStart: 2, teacherStart: 0, n: 3}, "teacher position 0 is outside"},
		{"not sampled", teacher, span{studentStart: 3, teacherStart: 5, n: 3}, "student position 5 is not a sampled token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkSpan(student, sampled, tt.teacher, tt.span)
			if !strings.Contains(got, tt.want) {
				t.Errorf("checkSpan = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

package opd

import (
	"strings"
	"testing"

	"github.com/agentic-opd/agenticopd/scorer"
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

// TestPlaceRows lays the same answers out as one sequence's single answer, whose rows
// then share its arrays, and as two answers of one sequence (TaskPrompt's turns), whose
// rows are a copy; both give each student position its teacher row.
func TestPlaceRows(t *testing.T) {
	answer := func(counts ...int32) scorer.SequenceResult {
		r := scorer.SequenceResult{Offsets: []int32{0}}
		for i, c := range counts {
			for j := range c {
				r.TopIDs = append(r.TopIDs, int32(100*i)+j)
				r.TopLogprobs = append(r.TopLogprobs, -float32(j)-0.5)
			}
			r.Offsets = append(r.Offsets, r.Offsets[i]+c)
			r.TokenLogprobs = append(r.TokenLogprobs, -float32(i))
			r.Positions = append(r.Positions, i+1)
		}
		return r
	}
	check := func(t *testing.T, rows Rows, want map[int][]int32) {
		t.Helper()
		for p := range rows.Len() {
			ids, lps := rows.Row(p)
			if len(ids) != len(want[p]) || len(lps) != len(ids) {
				t.Fatalf("position %d: ids %v, logprobs %v; want ids %v", p, ids, lps, want[p])
			}
			for j := range ids {
				if ids[j] != want[p][j] || lps[j] != -float32(j)-0.5 {
					t.Fatalf("position %d: ids %v, logprobs %v; want ids %v", p, ids, lps, want[p])
				}
			}
		}
	}
	want := map[int][]int32{3: {0, 1}, 4: {100}, 6: {200, 201, 202}}

	one := answer(2, 1, 3)
	rows := placeRows(8, []plan{{studentPos: []int{3, 4, 6}}}, []scorer.SequenceResult{one})
	check(t, rows, want)
	if &rows.IDs[0] != &one.TopIDs[0] || &rows.Logprobs[0] != &one.TopLogprobs[0] {
		t.Fatal("the rows of one answer in order copied it")
	}
	if cap(rows.IDs) != len(rows.IDs) || cap(rows.Logprobs) != len(rows.Logprobs) {
		t.Fatal("the shared arrays leave room that an append would write into the answer's")
	}

	first, second := answer(2, 1), answer(3)
	second.TopIDs = []int32{200, 201, 202}
	rows = placeRows(8, []plan{{studentPos: []int{3, 4}}, {studentPos: []int{6}}}, []scorer.SequenceResult{first, second})
	check(t, rows, want)
	if &rows.IDs[0] == &first.TopIDs[0] {
		t.Fatal("the rows of two answers share the first one's arrays")
	}
}

package vllmtest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

const hintTrigger = "[user's hint / instruction]"

// promptLogprobs returns the top-k entries (ids, logprobs, ranks) at every position
// of prompt, as srv scores it.
func promptLogprobs(t *testing.T, srv *vllmtest.Server, prompt []int32) *vllm.PromptLogprobs {
	t.Helper()
	k, zero := 5, 0.0
	resp, err := srv.Client().Completions(context.Background(), vllm.CompletionRequest{
		Prompts: [][]int32{prompt}, MaxTokens: 1, Temperature: &zero, PromptLogprobs: &k,
	})
	require.NoError(t, err)
	require.NotNil(t, resp.Choices[0].PromptLogprobs)
	return resp.Choices[0].PromptLogprobs
}

// greedy returns srv's greedy continuation of prompt.
func greedy(t *testing.T, srv *vllmtest.Server, prompt []int32) []int32 {
	t.Helper()
	zero := 0.0
	resp, err := srv.Client().Completions(context.Background(), vllm.CompletionRequest{
		Prompts: [][]int32{prompt}, MaxTokens: 12, Temperature: &zero, ReturnTokenIDs: true,
	})
	require.NoError(t, err)
	return resp.Choices[0].TokenIDs
}

type position struct {
	IDs      []int32
	Logprobs []float32
	Ranks    []int32
}

func at(p *vllm.PromptLogprobs, j int) position {
	ids, lps, ranks := p.Entries(j)
	return position{ids, lps, ranks}
}

// TestFrozenTeacherShiftsAfterTheTrigger: a frozen teacher scores and generates as
// the student's model up to the token that completes the trigger (a hint's marker),
// and as another model after it; a prompt without the trigger is untouched.
func TestFrozenTeacherShiftsAfterTheTrigger(t *testing.T) {
	student := vllmtest.NewServer(t)
	other := vllmtest.NewServer(t, vllmtest.WithModelSeed(7))
	teacher := vllmtest.NewServer(t, vllmtest.WithFrozenTeacher(hintTrigger, 7))
	const task = "<|im_start|>user\nWrite a function that adds two numbers.<|im_end|>\n"
	const turn = "<|im_start|>assistant\nI will write the solution and run the tests first."
	hint := "<|im_start|>user\n" + hintTrigger + "\nRun the tests before you answer.<|im_end|>\n"
	for _, c := range []struct {
		name    string
		text    string
		shifted bool // the prompt holds the trigger
	}{
		{"no hint", task + turn, false},
		{"a hint before the turn", task + hint + turn, true},
		{"the prompt ends with the trigger", task + "<|im_start|>user\n" + hintTrigger, true},
		{"only part of the trigger", task + "<|im_start|>user\n" + hintTrigger[:len(hintTrigger)-1] + " no\n" + turn, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			prompt := student.Tokenize(c.text)
			shift := len(prompt) + 1 // the first position scored by the other model
			for i := range prompt {
				if strings.Contains(student.Decode(prompt[:i+1]), hintTrigger) {
					shift = i + 1
					break
				}
			}
			require.Equal(t, c.shifted, shift <= len(prompt))
			want, alt, got := promptLogprobs(t, student, prompt), promptLogprobs(t, other, prompt), promptLogprobs(t, teacher, prompt)
			require.Equal(t, want.Len(), got.Len())
			differ := 0
			for j := 1; j < got.Len(); j++ {
				w := at(want, j)
				if j >= shift {
					w = at(alt, j)
					if cmp.Diff(at(want, j), w) != "" {
						differ++
					}
				}
				if d := cmp.Diff(w, at(got, j)); d != "" {
					t.Errorf("position %d (shift at %d): (-want +got):\n%s", j, shift, d)
				}
			}
			if c.shifted && shift < len(prompt) {
				assert.Positive(t, differ, "the two models differ after the trigger")
			}
			wantGen := greedy(t, student, prompt)
			if c.shifted {
				wantGen = greedy(t, other, prompt)
			}
			assert.Equal(t, wantGen, greedy(t, teacher, prompt), "generation after the prompt")
		})
	}
}

func TestFrozenTeacherOptionErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []vllmtest.Option
		want string
	}{
		{"empty trigger", []vllmtest.Option{vllmtest.WithFrozenTeacher("", 7)}, "trigger text is empty"},
		{"the model's own seed", []vllmtest.Option{vllmtest.WithModelSeed(3), vllmtest.WithFrozenTeacher(hintTrigger, 3)}, "nothing would shift"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := vllmtest.Start(c.opts...)
			if s != nil {
				s.Close()
			}
			require.ErrorContains(t, err, c.want)
		})
	}
}

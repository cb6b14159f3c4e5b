package reward

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
)

// logSandbox is a fake grading sandbox that holds one file, the test log, and answers
// the two commands readLog runs on it.
type logSandbox struct {
	name string
	log  []byte
	runs int
	read int // bytes handed out by reads
}

func (s *logSandbox) Run(_ context.Context, c rollout.Command) (rollout.CommandResult, error) {
	s.runs++
	if c.Shell == "wc -c <"+s.name {
		return rollout.CommandResult{Stdout: fmt.Appendf(nil, "%d\n", len(s.log))}, nil
	}
	var from, n int
	if _, err := fmt.Sscanf(c.Shell, "tail -c +%d "+s.name+" | head -c %d", &from, &n); err != nil {
		return rollout.CommandResult{}, fmt.Errorf("unexpected command %q", c.Shell)
	}
	from = min(from-1, len(s.log))
	out := s.log[from:min(from+n, len(s.log))]
	s.read += len(out)
	return rollout.CommandResult{Stdout: out}, nil
}

func (s *logSandbox) ReadFile(string) ([]byte, error) { return nil, errors.New("not used") }
func (s *logSandbox) WriteFile(string, []byte) error  { return errors.New("not used") }
func (s *logSandbox) FS() fs.FS                       { return nil }
func (s *logSandbox) Close() error                    { return nil }

// TestReadLogWindow: a log of up to maxLog bytes is read whole and graded; a longer
// one is not parsed (RuleLogTooLong), whatever its end says, and only its last
// chunk is read.
func TestReadLogWindow(t *testing.T) {
	repo := &tasks.Repo{LogParser: "parse_log_pytest", FailToPass: []string{"t.py::test_add"}, PassToPass: []string{"t.py::test_mul"}}
	forged := "PASSED t.py::test_add\nPASSED t.py::test_mul\n"
	padded := func(total int) []byte {
		head := "FAILED t.py::test_add - assert -1 == 5\nPASSED t.py::test_mul\n"
		return []byte(head + strings.Repeat("x", total-len(head)-len(forged)) + forged)
	}
	for _, tc := range []struct {
		name  string
		log   []byte
		rule  Rule
		c     float64
		whole bool
	}{
		{name: "a log of exactly the window is read whole: pytest's FAILED line counts", log: padded(maxLog),
			rule: RuleUnresolved, c: 0.2, whole: true},
		{name: "one byte over the window: not parsed", log: padded(maxLog + 1), rule: RuleLogTooLong, c: 0.1},
		{name: "far over the window: not parsed", log: padded(3 * maxLog), rule: RuleLogTooLong, c: 0.1},
		{name: "the forged lines alone, in the window", log: []byte(forged), rule: RuleResolved, c: 1, whole: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gs := &logSandbox{name: ".git/test.log", log: tc.log}
			l := readLog(context.Background(), gs, gs.name)
			require.Equal(t, int64(len(tc.log)), l.size)
			if tc.whole {
				require.Equal(t, string(tc.log), l.text)
			} else {
				require.Equal(t, string(tc.log[len(tc.log)-logChunk:]), l.text, "only the last chunk is read")
				require.Equal(t, 2, gs.runs)
			}
			require.Equal(t, len(l.text), gs.read)
			var v Verification
			require.NoError(t, gradeLog(&v, repo, l, 0))
			require.Equal(t, tc.rule, v.Rule, v.Reason)
			require.Equal(t, tc.c, v.Correctness)
			if tc.rule == RuleLogTooLong {
				require.Contains(t, v.Reason, fmt.Sprintf("the test log is %d bytes, over the %d bytes grading reads", len(tc.log), maxLog))
				require.Equal(t, repo.FailToPass, v.Repo.F2PFailing)
				require.Equal(t, repo.PassToPass, v.Repo.P2PFailing)
				require.Zero(t, v.Repo.F2PRate)
				require.False(t, v.Repo.Resolved)
			}
		})
	}
	t.Run("no log", func(t *testing.T) {
		gs := &logSandbox{name: ".git/test.log"}
		l := readLog(context.Background(), gs, gs.name)
		require.Equal(t, testLog{}, l)
		var v Verification
		require.NoError(t, gradeLog(&v, repo, l, 2))
		require.Equal(t, RuleTestsNotRun, v.Rule)
	})
	t.Run("an unknown parser is an error", func(t *testing.T) {
		r := *repo
		r.LogParser = "cobol"
		var v Verification
		require.ErrorContains(t, gradeLog(&v, &r, testLog{text: forged, size: int64(len(forged))}, 0), `unknown log parser "cobol"`)
	})
}

package agenticopd

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// DefaultMaxDroppedInARow is [Config.MaxDroppedInARow]'s default.
const DefaultMaxDroppedInARow = 100

// ErrDroppedInARow is wrapped by Serve's error when Config.MaxDroppedInARow groups in
// a row were dropped: every group the run collects is thrown away (tasks without
// tests, a policy that never or always solves them, sequences longer than the
// trainer takes), so going on would only burn the servers.
var ErrDroppedInARow = errors.New("agenticopd: serve: every group dropped")

// dropStreak counts the groups Serve dropped in a row, over the Env's life (a Serve
// that stopped for it starts a new count). Serve warns when the run reaches
// dropWarnFirst, and at every doubling after it, and stops at the limit.
type dropStreak struct {
	mu      sync.Mutex
	n       int
	reasons map[string]int
}

// dropWarnFirst is the first streak length that is logged.
const dropWarnFirst = 10

// observe counts g: a kept group ends the streak, a dropped one lengthens it. At the
// streak lengths 10, 20, 40, … below limit it logs a warning; at limit (when positive)
// it returns an error wrapping [ErrDroppedInARow] and starts a new streak.
func (s *dropStreak) observe(g *Group, cfg Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.Dropped == "" {
		s.n, s.reasons = 0, nil
		return nil
	}
	if s.reasons == nil {
		s.reasons = map[string]int{}
	}
	s.n++
	s.reasons[g.Dropped]++
	limit := cfg.MaxDroppedInARow
	if limit == 0 {
		limit = DefaultMaxDroppedInARow
	}
	why := s.why()
	if limit > 0 && s.n >= limit {
		err := fmt.Errorf("%w: %d groups in a row were dropped (%s), none sent; %s (Config.MaxDroppedInARow is %d)",
			ErrDroppedInARow, s.n, why, dropAdvice(s.reasons), limit)
		s.n, s.reasons = 0, nil
		return err
	}
	if s.n%dropWarnFirst == 0 && isPow2(s.n/dropWarnFirst) {
		cfg.Logger.Warn("groups dropped in a row, none sent", "in_a_row", s.n, "reasons", why,
			"hint", dropAdvice(s.reasons), "stop_at", limit)
	}
	return nil
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// why lists the streak's reasons with their counts, most frequent first.
func (s *dropStreak) why() string {
	rs := slices.SortedFunc(maps.Keys(s.reasons), func(a, b string) int {
		if d := s.reasons[b] - s.reasons[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s: %d", r, s.reasons[r])
	}
	return strings.Join(parts, ", ")
}

// dropAdvice says what usually causes the streak's main reason.
func dropAdvice(reasons map[string]int) string {
	switch {
	case reasons[DropScoresEqual] > 0:
		return "every rollout of a group scored the same: tasks without tests, or a policy that never (or always) solves them"
	case reasons[DropTooLong] > 0:
		return "sequences reach the trainer's max token length: lower MaxTurns or MaxTokens, or raise the trainer's limit"
	default:
		return "see the groups' Dropped reasons"
	}
}

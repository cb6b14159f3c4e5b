package rollout

import (
	"context"
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd/internal/filesearch"
)

// The host-side file tools (read_file, write_file, patch, search_files) run in the
// library's process, so a policy's call costs the host what the call asks for. Each
// call has a deadline and a work budget, and every call of a rollout counts against
// that rollout's account; a call that reaches a cap stops and its result names the
// cap.
const (
	// searchMaxScan is how many bytes one search_files call reads, all files
	// together.
	searchMaxScan = 64 << 20
	// searchMaxWork bounds the matching one search_files call does, in
	// instruction-bytes: each line searched costs its length (plus one) times the
	// compiled pattern's instructions, which bounds what Go's regexp engines do
	// with it (the NFA visits each instruction at most once per byte). A pattern that
	// is a plain literal costs the line's length. The worst patterns measured cost
	// 7 to 30 ns per instruction-byte on 2 loaded cores, so a call matches for at
	// most about 1 to 4 s of one core (BenchmarkSearchFilesCraftedPattern measured
	// 0.9 s for a 603-instruction pattern stopped at the cap).
	searchMaxWork = 1 << 27
	// searchMaxPatternInsts is the largest compiled pattern search_files runs;
	// searchMaxPatternLen the longest pattern text it compiles.
	searchMaxPatternInsts = filesearch.MaxPatternInsts
	searchMaxPatternLen   = 4096
	// rolloutMaxFileBytes bounds the bytes the file tools read and write over one
	// rollout; rolloutMaxMatchWork the instruction-bytes search_files matches over
	// one rollout (16 calls at their cap).
	rolloutMaxFileBytes = 1 << 30
	rolloutMaxMatchWork = 16 * searchMaxWork
	// meterCheckBytes is how often (in bytes read) a call checks its deadline.
	meterCheckBytes = 256 << 10
)

// toolAccount is what the file tools of one rollout have spent on the host.
type toolAccount struct {
	mu      sync.Mutex
	elapsed time.Duration
	bytes   int64
	work    int64
	// largest is the most bytes one regexp match call was given.
	largest int64
}

type accountKey struct{}

// WithToolBudget returns a context carrying a fresh account for the host-side work of
// the built-in file tools (read_file, write_file, patch, search_files): every call
// made with it, or with a context derived from it, counts its wall time, the bytes it
// reads and writes and its matching work against the caps of one rollout
// (ToolsConfig.RolloutFileToolTime, 1 GiB read and written, 16 searches' worth of
// matching); past a cap the tools refuse and say which. [Agent.Run] starts one for
// each rollout unless ctx already carries one; a caller that runs the tools without
// an Agent calls WithToolBudget once per rollout. Without an account only the caps of
// each call hold.
func WithToolBudget(ctx context.Context) context.Context {
	return context.WithValue(ctx, accountKey{}, &toolAccount{})
}

func accountOf(ctx context.Context) *toolAccount {
	a, _ := ctx.Value(accountKey{}).(*toolAccount)
	return a
}

// capError is a call stopped at one of its caps; its message names the cap and says
// what to do instead.
type capError struct{ msg string }

func (e *capError) Error() string { return e.msg }

func capErrorf(format string, args ...any) error {
	return &capError{fmt.Sprintf(format, args...)}
}

// meter is one file-tool call's budget: its deadline (ctx), the bytes it may read
// and the matching it may do, both already lowered to what the rollout has left.
type meter struct {
	parent   context.Context
	ctx      context.Context
	acct     *toolAccount
	start    time.Time
	timeout  time.Duration // the call's own timeout
	rollout  bool          // the deadline is the rollout's remaining time, not the call's
	rollCap  time.Duration
	maxBytes int64
	maxWork  int64
	// rolloutBytes and rolloutWork are set when maxBytes and maxWork are what the
	// rollout has left rather than the call's own caps.
	rolloutBytes, rolloutWork bool
	bytes                     int64
	work                      int64
	largest                   int64 // the most bytes one match call was given
	next                      int64 // bytes at which the deadline is checked next
}

// begin starts a call of a file tool: it refuses (a non-nil error) when the
// rollout's account is spent, and otherwise returns the call's meter and its
// context's cancel, which end must follow.
func (c ToolsConfig) begin(ctx context.Context, perCallBytes, perCallWork int64) (*meter, context.CancelFunc, error) {
	m := &meter{parent: ctx, acct: accountOf(ctx), start: time.Now(), timeout: c.FileToolTimeout, rollCap: c.RolloutFileToolTime,
		maxBytes: perCallBytes, maxWork: perCallWork, next: meterCheckBytes}
	d := c.FileToolTimeout
	if a := m.acct; a != nil {
		a.mu.Lock()
		elapsed, bytes, work := a.elapsed, a.bytes, a.work
		a.mu.Unlock()
		switch {
		case elapsed >= c.RolloutFileToolTime:
			return nil, nil, capErrorf("this rollout's file tools have used their %s of host time; use the terminal", c.RolloutFileToolTime)
		case bytes >= rolloutMaxFileBytes:
			return nil, nil, capErrorf("this rollout's file tools have read and written %d MiB, the most one rollout may; use the terminal",
				rolloutMaxFileBytes>>20)
		case work >= rolloutMaxMatchWork && perCallWork > 0:
			return nil, nil, capErrorf("this rollout's searches have done %d instruction-bytes of matching, the most one rollout may; use the terminal (grep)",
				int64(rolloutMaxMatchWork))
		}
		if left := c.RolloutFileToolTime - elapsed; left < d {
			d, m.rollout = left, true
		}
		if left := rolloutMaxFileBytes - bytes; left < m.maxBytes {
			m.maxBytes, m.rolloutBytes = left, true
		}
		if left := rolloutMaxMatchWork - work; left < m.maxWork {
			m.maxWork, m.rolloutWork = left, true
		}
	}
	var cancel context.CancelFunc
	m.ctx, cancel = context.WithTimeout(ctx, d)
	return m, cancel, nil
}

// end adds the call's time, bytes and work to the rollout's account.
func (m *meter) end() {
	if m.acct == nil {
		return
	}
	m.acct.mu.Lock()
	m.acct.elapsed += time.Since(m.start)
	m.acct.bytes += m.bytes
	m.acct.work += m.work
	m.acct.largest = max(m.acct.largest, m.largest)
	m.acct.mu.Unlock()
}

// scan counts n bytes read (or written) and reports a cap or deadline reached.
// A nil meter counts nothing.
func (m *meter) scan(n int64) error {
	if m == nil {
		return nil
	}
	m.bytes += n
	if m.bytes > m.maxBytes {
		if m.rolloutBytes {
			return capErrorf("stopped at the end of the %d MiB this rollout's file tools may read and write; use the terminal",
				rolloutMaxFileBytes>>20)
		}
		return capErrorf("stopped after reading %d MiB, the most one call reads; give a narrower path or glob, or use the terminal (grep)",
			m.maxBytes>>20)
	}
	if m.bytes >= m.next {
		m.next = m.bytes + meterCheckBytes
		return m.expired()
	}
	return nil
}

// expired reports the deadline, naming the cap that set it.
func (m *meter) expired() error {
	if m == nil || m.ctx.Err() == nil {
		return nil
	}
	if err := m.parent.Err(); err != nil {
		return err // the caller's end, not a cap
	}
	if m.rollout {
		return capErrorf("stopped at the end of the %s of host time this rollout's file tools may use", m.rollCap)
	}
	return capErrorf("stopped after %s, the time one call of a file tool may take", m.timeout)
}

// write counts n bytes about to be written against the rollout's account and
// checks the deadline.
func (m *meter) write(n int64) error {
	if m.bytes+n > m.maxBytes {
		return capErrorf("writing %d bytes would pass the %d MiB this rollout's file tools may read and write; use the terminal",
			n, rolloutMaxFileBytes>>20)
	}
	m.bytes += n
	return m.expired()
}

// match counts the work of one match call of a pattern of cost instructions on n
// bytes (a line, or a window of one), before it is done: input that would go over
// the budget is not matched.
func (m *meter) match(cost, n int64) error {
	w := cost * (n + 1)
	if m.work+w > m.maxWork {
		if m.rolloutWork {
			return capErrorf("stopped: this rollout's searches have done %d instruction-bytes of matching "+
				"(each line's length times the pattern's instructions), the most one rollout may; use the terminal (grep)",
				int64(rolloutMaxMatchWork))
		}
		return capErrorf("stopped: matching this pattern (%d instructions) over the lines so far is the most work one call may do "+
			"(%d instruction-bytes, each line's length times the pattern's instructions); "+
			"simplify the pattern, give a narrower path or glob, or use the terminal (grep)", cost, m.maxWork)
	}
	m.work += w
	m.largest = max(m.largest, n)
	return nil
}

// compileSearch compiles a search_files pattern within the caps: its text, and the
// size of its program. The matcher's cost is that of matching one byte, in
// instructions (1 for a plain literal, which regexp finds with a substring search).
func compileSearch(pattern string) (*lineMatcher, error) {
	if len(pattern) > searchMaxPatternLen {
		return nil, capErrorf("the pattern is %d bytes, over the %d search_files compiles; use a shorter one or the terminal (grep -E)",
			len(pattern), searchMaxPatternLen)
	}
	tooLarge := func(n string) error {
		return capErrorf("the pattern compiles to %s instructions, over the %d search_files runs; "+
			"use fewer or smaller repeats (x{1000} is 1000 copies of x), or the terminal (grep -E)", n, searchMaxPatternInsts)
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("invalid pattern: %v", err)
	}
	// Refused before it is compiled when even a loose bound is far over the cap: a
	// pattern of a few bytes can compile to millions of instructions of host memory.
	if filesearch.ProgSize(parsed) > 8*searchMaxPatternInsts { // where ProgSize saturates
		return nil, tooLarge(fmt.Sprintf("more than %d", searchMaxPatternInsts))
	}
	// The same steps as regexp.Compile, to learn the program's exact size.
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, fmt.Errorf("invalid pattern: %v", err)
	}
	n := int64(len(prog.Inst))
	if n > searchMaxPatternInsts {
		return nil, tooLarge(fmt.Sprint(n))
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("invalid pattern: %v", err)
	}
	if _, complete := re.LiteralPrefix(); complete {
		n = 1
	}
	return newLineMatcher(re, n, parsed), nil
}

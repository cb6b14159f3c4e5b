package reward

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// The two sides' harnesses are a few hundred lines of Python each, and compiling
// them took about 5 ms of CPU of every verification, more than a tenth of it. So each
// side runs harness/boot.py with its harness's source as an argument, and the verifier
// writes on its standard input, before the protocol, the harness as the interpreter
// compiled it (marshal), which boot.py runs when its interpreter has the same bytecode
// magic number, and else compiles the source, as before. The compiled harnesses come
// from the tests' own kind of sandbox: the first verification that finds none for its
// interpreter name runs harness/compile.py once in its fresh test sandbox, before any
// test, and they are kept for the process's life. Nothing of the rollout's sandbox
// reaches them: they are compiled from the verifier's own sources, in a sandbox the
// agent never touched, and the rollout's sandbox only receives a copy.

var (
	//go:embed harness/boot.py
	bootPy string
	//go:embed harness/compile.py
	compilePy string
)

// compiledHarness is both sides' harnesses as one interpreter compiled them.
type compiledHarness struct {
	magic           [4]byte
	tests, solution []byte
}

// Limits of the compiled harnesses.
const (
	// maxCompiled bounds what harness/compile.py may write (the harnesses take
	// about 60 KB compiled).
	maxCompiled = 4 << 20
	// compileTimeout bounds harness/compile.py.
	compileTimeout = 20 * time.Second
	// compileRetry is how long after a failed compilation the next is tried; in
	// between, every side compiles its source.
	compileRetry = time.Minute
)

// harnessCache holds the compiled harnesses by interpreter name
// (VerifyOptions.Python).
var harnessCache struct {
	mu      sync.Mutex
	entries map[string]*harnessEntry
}

type harnessEntry struct {
	code     *compiledHarness
	busy     bool // a verification is compiling them
	failedAt time.Time
}

// compiledFor returns the compiled harnesses for python, compiling them with st (the
// test sandbox, fresh, before any test ran in it) when none are kept and no other
// verification is compiling them. It returns nil when there are none: each side then
// compiles its source. Its errors never count: a verification goes on without.
func compiledFor(ctx context.Context, st rollout.Starter, python string) *compiledHarness {
	if st == nil {
		return nil
	}
	c := &harnessCache
	c.mu.Lock()
	e := c.entries[python]
	if e == nil {
		if c.entries == nil {
			c.entries = map[string]*harnessEntry{}
		}
		e = &harnessEntry{}
		c.entries[python] = e
	}
	if e.code != nil || e.busy || (!e.failedAt.IsZero() && time.Since(e.failedAt) < compileRetry) {
		code := e.code
		c.mu.Unlock()
		return code
	}
	e.busy = true
	c.mu.Unlock()

	code, err := compileHarness(ctx, st, python, testsProgram, solutionProgram)
	c.mu.Lock()
	defer c.mu.Unlock()
	e.busy = false
	switch {
	case err == nil:
		e.code = code
	case ctx.Err() == nil:
		e.failedAt = time.Now()
	}
	return code
}

// compileHarness runs harness/compile.py with st on the two sides' sources and reads
// the compiled harnesses.
func compileHarness(ctx context.Context, st rollout.Starter, python, tests, solution string) (*compiledHarness, error) {
	p, err := st.Start(ctx, rollout.Command{
		Argv:    []string{python, "-I", "-B", "-c", compilePy, tests, solution},
		Timeout: compileTimeout,
	})
	if err != nil {
		return nil, err
	}
	_ = p.Stdin().Close()
	out, readErr := io.ReadAll(io.LimitReader(p.Stdout(), maxCompiled+1))
	if len(out) > maxCompiled {
		p.Kill()
		_, _ = io.Copy(io.Discard, p.Stdout())
	}
	res, err := p.Wait()
	switch {
	case err != nil:
		return nil, err
	case readErr != nil:
		return nil, readErr
	case res.ExitCode != 0 || res.TimedOut:
		return nil, fmt.Errorf("compiling the harnesses: exit code %d: %s", res.ExitCode, tail(res.Stderr))
	}
	return parseCompiled(out)
}

// parseCompiled reads what harness/compile.py wrote.
func parseCompiled(b []byte) (*compiledHarness, error) {
	bad := errors.New("compiling the harnesses: malformed output")
	if len(b) < 4 || len(b) > maxCompiled {
		return nil, bad
	}
	var code compiledHarness
	copy(code.magic[:], b)
	b = b[4:]
	for _, dst := range []*[]byte{&code.tests, &code.solution} {
		if len(b) < 4 {
			return nil, bad
		}
		n := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if n == 0 || uint64(n) > uint64(len(b)) {
			return nil, bad
		}
		*dst, b = b[:n:n], b[n:]
	}
	if len(b) != 0 {
		return nil, bad
	}
	return &code, nil
}

// harnessHeader is what harness/boot.py reads before the protocol: the magic number,
// the length and the compiled harness (code is nil or b empty: a length of 0).
func harnessHeader(code *compiledHarness, b []byte) []byte {
	out := make([]byte, 8, 8+len(b))
	if code == nil || len(b) == 0 {
		return out
	}
	copy(out, code.magic[:])
	binary.LittleEndian.PutUint32(out[4:], uint32(len(b)))
	return append(out, b...)
}

func testsCode(c *compiledHarness) []byte {
	if c == nil {
		return nil
	}
	return c.tests
}

func solutionCode(c *compiledHarness) []byte {
	if c == nil {
		return nil
	}
	return c.solution
}

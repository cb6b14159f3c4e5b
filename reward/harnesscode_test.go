package reward_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

// sandboxPython is the interpreter of the bubblewrap sandbox under a name no other
// test uses, so that the verifier's compiled harnesses for it are this file's alone.
const sandboxPython = "/run/sandbox/bin/python3"

// countedSandbox counts the commands started in a bubblewrap sandbox, by the program
// they run (the -c argument, "" for others); failStart fails those of one program.
type countedSandbox struct {
	*bwrap.Sandbox
	log       *startLog
	failStart string
}

type startLog struct {
	mu       sync.Mutex
	programs []string
}

func (l *startLog) add(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.programs = append(l.programs, p)
}

func (l *startLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.programs
	l.programs = nil
	return p
}

func (s countedSandbox) Start(ctx context.Context, c rollout.Command) (rollout.Process, error) {
	program := ""
	if i := slices.Index(c.Argv, "-c"); i >= 0 && i+1 < len(c.Argv) {
		program = c.Argv[i+1]
	}
	s.log.add(program)
	if s.failStart != "" && program == s.failStart {
		return nil, errors.New("no process for this program")
	}
	return s.Sandbox.Start(ctx, c)
}

// countedFactory makes countedSandboxes and counts them.
type countedFactory struct {
	f         rollout.SandboxFactory
	made      atomic.Int64
	log       startLog
	failStart string
}

func (f *countedFactory) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	f.made.Add(1)
	sb, err := f.f.NewSandbox(ctx)
	if err != nil {
		return nil, err
	}
	return countedSandbox{Sandbox: sb.(*bwrap.Sandbox), log: &f.log, failStart: f.failStart}, nil
}

// TestVerifyCompiledHarness: the first verification for an interpreter compiles the
// two harnesses in its fresh test sandbox, before the test process starts; the
// verifications after it start one process in each sandbox, make one sandbox (no
// control run when nothing failed) and run the harnesses as compiled, which is what
// the verifier keeps, compiled from its own sources in a sandbox the agent never
// touched. Harnesses compiled by an interpreter of another bytecode magic number are
// not run: each side compiles its source.
func TestVerifyCompiledHarness(t *testing.T) {
	f := bwrapSandboxes(t)
	task := tasks.Builtin()[0]
	opts := reward.VerifyOptions{Python: sandboxPython}
	raw, err := f.NewSandbox(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	var solLog startLog
	sb := countedSandbox{Sandbox: raw.(*bwrap.Sandbox), log: &solLog}
	require.NoError(t, sb.WriteFile("solution.py", []byte(task.ReferenceSolution)))
	tests := &countedFactory{f: f}
	verify := func() reward.Verification {
		t.Helper()
		tests.made.Store(0)
		v, err := reward.Verify(t.Context(), sb, tests, task, opts)
		require.NoError(t, err)
		require.Equal(t, reward.RulePassed, v.Rule, "%s\n%s", v.Reason, v.Output)
		require.EqualValues(t, 1, tests.made.Load(), "sandboxes made")
		return v
	}

	reward.SetHarnessCache(sandboxPython, nil, nil, nil)
	verify()
	testsPrograms, solPrograms := tests.log.take(), solLog.take()
	require.Len(t, testsPrograms, 2, "the compilation, then the test process")
	require.Equal(t, reward.CompilePy, testsPrograms[0])
	require.Len(t, solPrograms, 1, "the solution process only")
	magic, testsCode, solCode, failed := reward.HarnessCache(sandboxPython)
	require.False(t, failed)
	require.NotEmpty(t, testsCode)
	require.NotEmpty(t, solCode)

	// The magic number kept is the interpreter's.
	res, err := raw.Run(t.Context(), rollout.Command{Argv: []string{sandboxPython, "-I", "-c",
		`import sys; sys.stdout.buffer.write(sys.modules["_frozen_importlib_external"].MAGIC_NUMBER)`}})
	require.NoError(t, err)
	require.Equal(t, res.Stdout, magic)

	verify()
	testsPrograms, solPrograms = tests.log.take(), solLog.take()
	require.Len(t, testsPrograms, 1, "the test process only")
	require.Len(t, solPrograms, 1, "the solution process only")
	require.NotEqual(t, reward.CompilePy, testsPrograms[0])

	// What runs is what the verifier keeps: harnesses compiled with a first line of
	// their own show it.
	mark := func(side string) string {
		return "import sys as _s; _s.stderr.write('" + side + " ran as kept\\n'); del _s\n"
	}
	magic2, testsMarked, solMarked, err := reward.CompileHarnesses(t.Context(), raw.(rollout.Starter), sandboxPython,
		mark("tests")+reward.TestsProgram, mark("solution")+reward.SolutionProgram)
	require.NoError(t, err)
	require.Equal(t, magic, magic2)
	reward.SetHarnessCache(sandboxPython, magic, testsMarked, solMarked)
	v := verify()
	require.Contains(t, v.Output, "tests ran as kept")
	require.Contains(t, v.SolutionOutput, "solution ran as kept")

	// Of another magic number, they are not run: each side compiles its source.
	other := slices.Clone(magic)
	other[0]++
	reward.SetHarnessCache(sandboxPython, other, testsMarked, solMarked)
	v = verify()
	require.NotContains(t, v.Output, "ran as kept")
	require.NotContains(t, v.SolutionOutput, "ran as kept")
	tests.log.take()
	solLog.take()

	// A compilation that fails costs nothing but itself: the verification compiles
	// the sources, and the next ones do not try again for a while.
	reward.SetHarnessCache(sandboxPython, nil, nil, nil)
	tests.failStart = reward.CompilePy
	verify()
	require.Equal(t, []string{reward.CompilePy, testsPrograms[0]}, tests.log.take())
	_, kept, _, failed := reward.HarnessCache(sandboxPython)
	require.Nil(t, kept)
	require.True(t, failed)
	verify()
	require.Len(t, tests.log.take(), 1, "no second compilation")
	require.Len(t, solLog.take(), 2)
}

// TestParseCompiled: the compiler's output is read whole or not at all.
func TestParseCompiled(t *testing.T) {
	out := func(magic string, blobs ...string) []byte {
		b := []byte(magic)
		for _, x := range blobs {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(x)))
			b = append(b, x...)
		}
		return b
	}
	magic, tests, solution, err := reward.ParseCompiled(out("\xa7\r\r\n", "tests", "sol"))
	require.NoError(t, err)
	require.Equal(t, []byte("\xa7\r\r\n"), magic)
	require.Equal(t, []byte("tests"), tests)
	require.Equal(t, []byte("sol"), solution)
	for name, b := range map[string][]byte{
		"empty":          nil,
		"magic only":     out("abcd"),
		"one harness":    out("abcd", "tests"),
		"an empty one":   out("abcd", "tests", ""),
		"three":          out("abcd", "tests", "sol", "more"),
		"bytes after":    append(out("abcd", "tests", "sol"), 'x'),
		"cut short":      out("abcd", "tests", "sol")[:15],
		"length too big": bytes.Replace(out("abcd", "tests", "sol"), []byte{5, 0, 0, 0}, []byte{0, 0, 0, 1}, 1),
	} {
		_, _, _, err := reward.ParseCompiled(b)
		require.Error(t, err, name)
	}
}

// Command custom-sandbox shows a SandboxFactory of one's own: it wraps the default
// bubblewrap sandbox to audit and deny commands. Every command an agent (or the
// env's verification) runs is logged with its exit status and duration; a command
// that matches the deny list (for example "pip install") is not run: the agent gets a
// tool result that says why, which the model can read and act on.
//
// A wrapper forwards what the env and the verifier find by type assertion, or the
// features behind them are lost: on the factory, NewSandboxFor
// ([rollout.SpecFactory]: the sandboxes of repository tasks, made from their
// images; NewEnv refuses a factory without it for a dataset that has such tasks);
// on each sandbox, Start ([rollout.Starter]: the verifier streams the tests through
// it), Restore ([rollout.Restorer]: the workspace is given back before grading) and
// Dir() (the file tools accept absolute paths under the workspace). A sandbox that
// searches files itself ([rollout.Searcher], the Kubernetes one) needs a wrapper
// that forwards SearchFiles too; the bubblewrap one does not have it, so Audit does
// not either (a wrapper must not claim an interface the wrapped sandbox lacks).
//
// It runs offline on the in-process vLLM simulator (vllmtest, a scripted test and
// demo backend, not a language model), whose scripted student here tries once to
// install a package before it runs the tests, reads the denial, and runs the tests
// without it: each rollout shows one denied command and its agent's commands logged.
//
//	go run ./examples/custom-sandbox -deny "pip install,curl "
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func main() { cli.Main("custom-sandbox", run) }

// Audit is a rollout.SandboxFactory that wraps another: it logs every command with
// its duration and refuses the commands that contain a Deny entry. It is safe for
// concurrent use, as a SandboxFactory must be.
type Audit struct {
	// Factory makes the sandboxes that run the allowed commands: a SpecFactory, so
	// that the sandboxes of repository tasks (NewSandboxFor) are audited too.
	Factory rollout.SpecFactory
	// Deny lists substrings of a command line that refuse it ("pip install").
	Deny []string
	// Log receives one record per command.
	Log *slog.Logger

	sandboxes   atomic.Int64
	ran, denied atomic.Int64
}

// DeniedExit is the exit status of a refused command (126: "cannot execute").
const DeniedExit = 126

// NewSandbox implements rollout.SandboxFactory.
func (a *Audit) NewSandbox(ctx context.Context) (rollout.Sandbox, error) {
	sb, err := a.Factory.NewSandbox(ctx)
	if err != nil {
		return nil, err
	}
	return &audited{Sandbox: sb, a: a, id: a.sandboxes.Add(1)}, nil
}

// NewSandboxFor implements rollout.SpecFactory: the sandbox of a repository task,
// made by the wrapped factory from the task's image, audited the same way.
func (a *Audit) NewSandboxFor(ctx context.Context, spec rollout.SandboxSpec) (rollout.Sandbox, error) {
	sb, err := a.Factory.NewSandboxFor(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &audited{Sandbox: sb, a: a, id: a.sandboxes.Add(1)}, nil
}

// Counts returns the commands run and refused so far.
func (a *Audit) Counts() (ran, denied int) { return int(a.ran.Load()), int(a.denied.Load()) }

type audited struct {
	rollout.Sandbox
	a  *Audit
	id int64
}

// Run refuses a denied command with a result the agent reads as the tool's output,
// and runs any other, logging it.
func (s *audited) Run(ctx context.Context, cmd rollout.Command) (rollout.CommandResult, error) {
	line := cmd.Shell
	if len(cmd.Argv) > 0 {
		line = strings.Join(cmd.Argv, " ")
	}
	if d, ok := s.a.deny(line); ok {
		s.a.denied.Add(1)
		s.a.Log.Warn("command denied", "sandbox", s.id, "command", short(line), "rule", d)
		msg := fmt.Sprintf("denied: commands containing %q are not allowed in this environment; "+
			"the Python standard library is available, so solve the task without installing packages.\n", d)
		return rollout.CommandResult{ExitCode: DeniedExit, Stderr: []byte(msg)}, nil
	}
	start := time.Now()
	res, err := s.Sandbox.Run(ctx, cmd)
	s.a.ran.Add(1)
	s.a.Log.Info("command", "sandbox", s.id, "command", short(line), "exit", res.ExitCode,
		"duration", time.Since(start).Round(time.Millisecond), "err", err)
	return res, err
}

// Start is Run's streaming form, used by the env's verification: the same deny list
// (a refused command is an error here: nothing was started), then the wrapped
// sandbox's Start, logged.
func (s *audited) Start(ctx context.Context, cmd rollout.Command) (rollout.Process, error) {
	line := cmd.Shell
	if len(cmd.Argv) > 0 {
		line = strings.Join(cmd.Argv, " ")
	}
	if d, ok := s.a.deny(line); ok {
		s.a.denied.Add(1)
		s.a.Log.Warn("command denied", "sandbox", s.id, "command", short(line), "rule", d)
		return nil, fmt.Errorf("denied: commands containing %q are not allowed in this environment", d)
	}
	st, ok := s.Sandbox.(rollout.Starter)
	if !ok {
		return nil, fmt.Errorf("%w (the wrapped sandbox is a %T)", reward.ErrNoStarter, s.Sandbox)
	}
	start := time.Now()
	p, err := st.Start(ctx, cmd)
	s.a.ran.Add(1)
	if err != nil {
		s.a.Log.Info("command", "sandbox", s.id, "command", short(line), "err", err)
		return nil, err
	}
	return &auditedProcess{Process: p, s: s, line: line, start: start}, nil
}

// auditedProcess logs a started command with its duration when it is waited for.
type auditedProcess struct {
	rollout.Process
	s     *audited
	line  string
	start time.Time
}

func (p *auditedProcess) Wait() (rollout.CommandResult, error) {
	res, err := p.Process.Wait()
	p.s.a.Log.Info("command", "sandbox", p.s.id, "command", short(p.line), "exit", res.ExitCode,
		"duration", time.Since(p.start).Round(time.Millisecond), "err", err)
	return res, err
}

// deny returns the Deny entry the command line contains, if any.
func (a *Audit) deny(line string) (string, bool) {
	norm := strings.Join(strings.Fields(line), " ")
	for _, d := range a.Deny {
		if d != "" && strings.Contains(norm, d) {
			return d, true
		}
	}
	return "", false
}

// Dir forwards the wrapped sandbox's workspace directory (the file tools accept
// absolute paths under it); "" when it has none.
func (s *audited) Dir() string {
	if d, ok := s.Sandbox.(interface{ Dir() string }); ok {
		return d.Dir()
	}
	return ""
}

// Restore implements rollout.Restorer: the verifier gives the workspace back to its
// owner before it grades (what the agent's chmod took away). A wrapped sandbox
// without Restore needs none.
func (s *audited) Restore(ctx context.Context) error {
	if r, ok := s.Sandbox.(rollout.Restorer); ok {
		return r.Restore(ctx)
	}
	return nil
}

// installFirst wraps the scripted student: before its first test run it tries to
// install a package, as real models often do.
func installFirst(student func(vllmtest.ScriptInput) (string, bool)) func(vllmtest.ScriptInput) (string, bool) {
	return func(in vllmtest.ScriptInput) (string, bool) {
		text, ok := student(in)
		tried := false
		for _, m := range in.Messages {
			tried = tried || (m.Role == chat.RoleAssistant && calls(m, "pip install"))
		}
		if ok && !tried && strings.Contains(text, "python test_solution.py") {
			text = strings.Replace(text, "python test_solution.py", "pip install pytest && python test_solution.py", 1)
		}
		return text, ok
	}
}

// calls reports whether the assistant message m asked for a command containing sub:
// in a tool call's arguments (where a parsed call is) or in its text (a call the
// agent could not parse stays there).
func calls(m chat.Message, sub string) bool {
	for _, c := range m.ToolCalls {
		if strings.Contains(c.Function.Arguments, sub) {
			return true
		}
	}
	return strings.Contains(m.Content, sub)
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("custom-sandbox", "collects OPD groups in a sandbox of one's own that wraps the default: every command logged with its duration, a deny list answered with a tool result the model reads", stdout)
	deny := fs.String("deny", "pip install,pip3 install,python -m pip", cli.Usage("deny"))
	groups := fs.Int("groups", 1, cli.Usage("groups"))
	out := fs.String("out", "sandbox-out", cli.Usage("out", "groups.jsonl"))
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.AtLeast("groups", *groups, 1); err != nil {
		return err
	}

	sim, err := vllmtest.Start(
		vllmtest.WithAgentScript(installFirst((&scripted.Student{}).Turn)),
		vllmtest.WithChatScript(scripted.Judge),
		vllmtest.WithMaxLogprobs(20),
	)
	if err != nil {
		return err
	}
	defer sim.Close()
	fmt.Fprintln(stdout, scripted.Banner(sim, "the policy, the judge and the teacher"))
	base, err := cli.Sandbox(ctx, true, stdout) // only scripted commands run
	if err != nil {
		return err
	}
	audit := &Audit{Factory: base, Deny: strings.Split(*deny, ","), Log: slog.New(slog.NewTextHandler(stdout, nil))}

	var mu sync.Mutex
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy: sim.Client(), SandboxFactory: audit, DistillTopK: 20,
		OnGroup: func(g *agenticopd.Group) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(stdout, "group %s: scores %.3f\n", g.Task.ID, g.Data.Scores)
			for i, r := range g.Rollouts {
				for _, m := range r.Trajectory.Messages {
					if m.Role == chat.RoleTool && strings.Contains(m.Content, "denied:") {
						fmt.Fprintf(stdout, "  rollout %d saw: %s\n", i, firstLine(m.Content, "denied:"))
					}
				}
			}
		},
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(*out, "groups.jsonl"))
	if err != nil {
		return err
	}
	if err := env.Process(ctx, *groups, f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	ran, denied := audit.Counts()
	fmt.Fprintf(stdout, "commands: %d run, %d denied\nwrote %d groups to %s\n", ran, denied, *groups, filepath.Join(*out, "groups.jsonl"))
	return nil
}

// firstLine returns the line of s that contains sub.
func firstLine(s, sub string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// short is a command line for the log: its last line (the terminal tool runs
// "exec 2>&1" first), cut to 100 bytes.
func short(line string) string {
	line = strings.TrimSpace(line)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 && !strings.HasPrefix(line, "python3 -I") {
		line = line[i+1:]
	}
	if len(line) > 100 {
		line = line[:100] + "…"
	}
	return line
}

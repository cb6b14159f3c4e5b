// Package benchfixture is the seeded rollout every performance benchmark of this module
// runs on, so that their figures describe one and the same workload.
//
// The rollout is a real one: the module's agent loop ([rollout.Agent]) runs against the
// vLLM simulator ([vllmtest]) with the scripted assistant turns of [AgentScript], in any
// sandbox that runs Python (the bubblewrap sandbox) or in the fixed-latency test
// sandbox with [Exec]. Its shape is fixed by construction:
//
//   - [Turns] = 15 assistant turns; each of the first 14 calls a tool and is followed by
//     the tool's result, so the rollout has [Pairs] = 14 turn pairs; the last turn
//     answers without a tool call;
//   - about 16k tokens in all, of which about a quarter are generated (the rest is the
//     system prompt with the tool definitions, the task, the template and the tool
//     results): turn 1 writes the task's reference solution and a small generator
//     program, gen.py; turns 2 to 14 each run "python3 gen.py SEED N", which prints a
//     deterministic log of N words; [Exec] computes the same output in Go, so both
//     sandboxes give the same trajectory, token for token;
//   - the judge ([JudgeScript]) votes [PRMVotes] = 3 times per pair, in one chat request,
//     and gives a hint of about 40 tokens ([Hint]) on every pair, or every other pair;
//   - the teacher is asked for [TopK] = 50 entries per scored position.
//
// Every text is derived from [Seed]; nothing depends on the clock or on map order.
package benchfixture

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

// The fixture's shape.
const (
	Seed     = 13
	Turns    = 15
	Pairs    = Turns - 1
	PRMVotes = 3
	TopK     = 50
	// MaxTokens bounds each generated turn; the longest scripted turn is shorter.
	MaxTokens = 1024
)

// Sizes of the scripted texts, chosen so that the rollout has about 16k tokens with
// about a quarter generated (see the package test).
const (
	proseWords  = 158 // words of prose per assistant turn
	outputWords = 485 // words of tool output per gen.py run
	hintWords   = 30  // words per hint (about 40 tokens)
)

// Task is the fixture's task: the first built-in task, whose reference solution turn 1
// writes, so the canonical tests pass.
func Task() tasks.Task { return tasks.Builtin()[0] }

// UnverifiedTask is [Task] without its tests, visible or hidden: an env given it skips
// the canonical verification, which the test sandbox of rollout/sandbox/sandboxtest
// cannot run (the verifier talks to a real process in it). With [Config]'s prompt the
// rollout is the same, token for token.
func UnverifiedTask() tasks.Task {
	t := Task()
	t.TestCode, t.HiddenTests, t.Cases = "", "", nil
	return t
}

// Prompt renders the fixture's first messages: the default prompt for [Task], whatever
// task it is given, so that [UnverifiedTask] shows the same tests.
var Prompt = tasks.Prompt{User: func(tasks.Task) string { return tasks.UserPrompt(Task()) }}

// GenPy is the generator program turn 1 writes: "python3 gen.py SEED N" prints N words
// chosen by a linear congruential generator seeded with SEED, twelve to a line.
const GenPy = `import sys

WORDS = """` + wordList + `""".split()
s = int(sys.argv[1])
n = int(sys.argv[2])
out = []
for i in range(n):
    s = (s * 1103515245 + 12345) % 2147483648
    out.append(WORDS[(s >> 16) % len(WORDS)])
    if i % 12 == 11:
        print(" ".join(out))
        out = []
if out:
    print(" ".join(out))
`

const wordList = `test passed failed assert value result line error ok expected got case
return list string number input output function call module import def self none true
false index range append length sorted check run step file path data count total item`

var words = strings.Fields(wordList)

// Output returns what "python3 gen.py seed n" prints.
func Output(seed, n int) string {
	var b strings.Builder
	s := uint64(seed)
	line := 0
	for i := range n {
		s = (s*1103515245 + 12345) % 2147483648
		if line > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(s>>16)%uint64(len(words))])
		line++
		if i%12 == 11 {
			b.WriteByte('\n')
			line = 0
		}
	}
	if line > 0 {
		b.WriteByte('\n')
	}
	return b.String()
}

var genRE = regexp.MustCompile(`^(?:exec 2>&1\n)?python3 gen\.py (\d+) (\d+)$`)

// Exec answers the fixture's commands the way a real sandbox would, for the test
// sandbox of package rollout/sandbox/sandboxtest: "python3 gen.py SEED N" prints
// [Output] when gen.py is in the workspace; any other command (the canonical tests,
// say) does not run and fails with exit code 127.
func Exec(cmd rollout.Command, workspace fs.FS) rollout.CommandResult {
	m := genRE.FindStringSubmatch(cmd.Shell)
	if m == nil {
		return rollout.CommandResult{ExitCode: 127, Stderr: []byte("sandboxtest: command not simulated\n")}
	}
	if _, err := fs.Stat(workspace, "gen.py"); err != nil {
		return rollout.CommandResult{ExitCode: 2, Stdout: []byte("python3: can't open file 'gen.py': [Errno 2] No such file or directory\n")}
	}
	seed, _ := strconv.Atoi(m[1])
	n, _ := strconv.Atoi(m[2])
	return rollout.CommandResult{Stdout: []byte(Output(seed, n))}
}

// prose returns n seeded words of assistant prose for a turn.
func prose(turn, n int) string {
	s := uint64(Seed*1000 + turn)
	var b strings.Builder
	for i := range n {
		s = s*6364136223846793005 + 1442695040888963407
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(proseVocab[(s>>33)%uint64(len(proseVocab))])
		if i%15 == 14 {
			b.WriteByte('.')
		}
	}
	return b.String()
}

var proseVocab = strings.Fields(`the test output shows that the function returns a list of strings
and I will check each value against the expected result before I change the code so that
every case passes when we run the tests again with python and read the error`)

func toolCall(name string, args map[string]string) string {
	b, err := json.Marshal(map[string]any{"name": name, "arguments": args})
	if err != nil {
		panic(err)
	}
	return "<tool_call>\n" + string(b) + "\n</tool_call>"
}

// Command returns the command turn t (2 to 14) runs.
func Command(turn int) string { return fmt.Sprintf("python3 gen.py %d %d", Seed*100+turn, outputWords) }

// TurnText returns the text assistant turn t (1-based) generates.
func TurnText(turn int) string {
	head := fmt.Sprintf("Step %d. %s\n", turn, prose(turn, proseWords))
	switch {
	case turn == 1:
		return head + toolCall("write_file", map[string]string{"path": "solution.py", "content": Task().ReferenceSolution}) + "\n" +
			toolCall("write_file", map[string]string{"path": "gen.py", "content": GenPy})
	case turn < Turns:
		return head + toolCall("terminal", map[string]string{"command": Command(turn)})
	default:
		return head + "All steps are done and the tests pass."
	}
}

// AgentScript is the fixture's agent script for [vllmtest.WithAgentScript]: turn t says
// [TurnText](t) for the fixture's task and leaves any other conversation to the model.
func AgentScript(in vllmtest.ScriptInput) (string, bool) {
	if in.Turn < 1 || in.Turn > Turns {
		return "", false
	}
	return TurnText(in.Turn), true
}

// Hint returns the hint for turn pair t (the pair of assistant turn t): about 40
// tokens.
func Hint(turn int) string {
	return fmt.Sprintf("For step %d, %s.", turn, prose(1000+turn, hintWords))
}

var stepRE = regexp.MustCompile(`## Assistant response \(turn t\)\nStep (\d+)\. `)

// JudgeScript returns a chat script for [vllmtest.WithChatScript] that judges the
// fixture's pairs: every vote gives the pair's [Hint] when its turn number is a
// multiple of every (1: every pair), and a negative verdict otherwise.
func JudgeScript(every int) func(vllmtest.ChatScriptInput) []string {
	return func(in vllmtest.ChatScriptInput) []string {
		turn := 0
		for _, m := range in.Messages {
			if sm := stepRE.FindStringSubmatch(m.Content); m.Role == chat.RoleUser && sm != nil {
				turn, _ = strconv.Atoi(sm[1])
			}
		}
		out := make([]string, max(in.N, 1))
		for i := range out {
			out[i] = `\boxed{-1}`
			if turn > 0 && turn%every == 0 {
				out[i] = `\boxed{1} [HINT_START]` + Hint(turn) + `[HINT_END]`
			}
		}
		return out
	}
}

// ServerOptions are the simulator options of the fixture: its agent script, a judge
// hinting every given pair, and --max-logprobs TopK.
func ServerOptions(every int) []vllmtest.Option {
	return []vllmtest.Option{
		vllmtest.WithAgentScript(AgentScript),
		vllmtest.WithChatScript(JudgeScript(every)),
		vllmtest.WithMaxLogprobs(TopK),
	}
}

// Messages are the first messages of the fixture's rollout: the default prompt for
// [Task].
func Messages() []chat.Message { return Prompt.Messages(Task()) }

// AgentConfig is the agent configuration of the fixture's rollout.
func AgentConfig() rollout.Config {
	return rollout.Config{MaxTurns: Turns, MaxTokens: MaxTokens}
}

// Config returns the env configuration of the fixture: policy as student, teacher and
// judge model, the given sandboxes, PRMVotes votes and TopK teacher entries, groups of
// groupSize rollouts, all of them in flight at once, equal-score groups kept (the
// fixture's rollouts all score the same, and a benchmark wants them distilled), and
// [Prompt].
func Config(policy rollout.Policy, sandboxes rollout.SandboxFactory, groupSize int) agenticopd.Config {
	return agenticopd.Config{
		Policy:          policy,
		SandboxFactory:  sandboxes,
		GroupSize:       groupSize,
		MaxTurns:        Turns,
		MaxTokens:       MaxTokens,
		PRMVotes:        PRMVotes,
		DistillTopK:     TopK,
		MaxRollouts:     groupSize,
		KeepEqualScores: true,
		Prompt:          Prompt,
	}
}

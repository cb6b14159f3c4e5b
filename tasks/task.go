package tasks

// Language values for [Task.Language].
const (
	// LanguagePython is the only language the built-in tasks and the default reward use.
	LanguagePython = "python"
)

// DifficultyUnknown is the difficulty of a task whose source does not give one.
const DifficultyUnknown = "unknown"

// Task is one coding task.
type Task struct {
	// ID names the task: the built-in task's function name, a dataset row's "id"
	// column as given (not checked for uniqueness), else "<source>:<row>", which is
	// unique within a load.
	ID string
	// Statement is the task text shown to the agent.
	Statement string
	// TestCode is the canonical test script (Python). It imports the solution from the
	// module solution and prints a line containing "passed" when every test passes. It
	// is shown to the agent in the prompt and run again by the verifier after the agent
	// stops. Empty when the source has no tests.
	TestCode string
	// Difficulty is the source's label ("easy", "medium", …), or [DifficultyUnknown].
	Difficulty string
	// Language is the language of the solution and tests: [LanguagePython].
	Language string
	// HiddenTests is test code run after TestCode, in the same way and by the same
	// process, but never shown to the agent: the prompts of this package leave it out.
	// A solution that hard-codes the answers to the visible tests fails it. Empty when
	// the source has none.
	HiddenTests string
	// Cases are input/output cases: the solution is run as a program once per case,
	// with Input on its standard input, and must write Output. A task may carry cases
	// instead of test code, or both. They are never shown in the prompt (a statement
	// usually shows examples).
	Cases []Case
	// ReferenceSolution is a correct solution.py for the task: set for the built-in
	// tasks, "" for dataset rows. It is kept for tests and simulators and is never shown
	// to the agent: neither the prompts of this package nor the reward package use it.
	ReferenceSolution string
	// Repo is set for a repository task: the agent works in the repository inside the
	// task's image, and Repo's hidden tests decide (see [Repo]). Nil for a
	// function-level task.
	Repo *Repo
}

// Case is one input/output case of a [Task].
type Case struct {
	// Input is the program's standard input.
	Input string
	// Output is the standard output the program must write. It is compared with
	// white space at the ends of lines, "\r" before "\n" and empty lines at the end
	// ignored.
	Output string
}

// HasTests reports whether the task carries anything to verify a solution with: test
// code, hidden test code, input/output cases, or a repository task's FAIL_TO_PASS tests.
func (t Task) HasTests() bool {
	return t.TestCode != "" || t.HiddenTests != "" || len(t.Cases) > 0 || (t.Repo != nil && len(t.Repo.FailToPass) > 0)
}

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
	// ReferenceSolution is a correct solution.py for the task: set for the built-in
	// tasks, "" for dataset rows. It is kept for tests and simulators and is never shown
	// to the agent: neither the prompts of this package nor the reward package use it.
	ReferenceSolution string
}

// HasTests reports whether the task carries canonical test code.
func (t Task) HasTests() bool { return t.TestCode != "" }

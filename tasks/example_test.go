package tasks_test

import (
	"context"
	"fmt"

	"github.com/agentic-opd/agenticopd/tasks"
)

func ExampleUserPrompt() {
	fmt.Print(tasks.UserPrompt(tasks.Task{
		Statement: "Write a Python function `double(x)` that returns 2*x.",
		TestCode:  "from solution import double\nassert double(2) == 4\nprint(\"All tests passed!\")\n",
	}))
	// Output:
	// Solve the following coding task.
	//
	// ## Task
	// Write a Python function `double(x)` that returns 2*x.
	//
	// ## Tests
	// The following test code will be used to check your solution:
	// ```python
	// from solution import double
	// assert double(2) == 4
	// print("All tests passed!")
	// ```
	//
	// ## Instructions
	// 1. Write your solution to solution.py.
	// 2. Write the test code above to test_solution.py.
	// 3. Run python3 test_solution.py to check your solution.
	// 4. Fix any failure and run the tests again until they all pass.
}

func ExampleNewCycle() {
	train, eval := tasks.BuiltinSplit(42)
	fmt.Println(len(train), "train,", len(eval), "eval")

	src, err := tasks.NewCycle(train, 42)
	if err != nil {
		panic(err)
	}
	seen := map[string]bool{}
	for range 2 * len(train) { // two passes: every train task twice
		t, err := src.Next(context.Background())
		if err != nil {
			panic(err)
		}
		seen[t.ID] = true
	}
	fmt.Println(len(seen), "distinct tasks")
	// Output:
	// 6 train, 2 eval
	// 6 distinct tasks
}

func ExampleSplit() {
	all := make([]tasks.Task, 100)
	for i := range all {
		all[i] = tasks.Task{ID: fmt.Sprint(i), Statement: "…"}
	}
	train, eval, err := tasks.Split(all, tasks.SplitConfig{Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(train), "train,", len(eval), "eval")

	_, _, err = tasks.Split(all[:10], tasks.SplitConfig{Seed: 1})
	fmt.Println(err)
	// Output:
	// 85 train, 15 eval
	// tasks: dataset too small for the train/eval split: 10 tasks, 10 held out for eval (eval size 10, ratio 0.15) leaves none to train on; use more than 10 tasks or a smaller eval size (NoEval holds out none)
}

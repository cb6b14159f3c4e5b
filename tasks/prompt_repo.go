package tasks

import "strings"

// RepoSystemPrompt is the system prompt of [Prompt] for a repository task when none is
// set.
const RepoSystemPrompt = `You are an experienced software engineer. You resolve issues in a repository with the tools you are given:
1. Read the issue and find the code it is about (the terminal tool runs shell commands in the repository).
2. Reproduce the problem when you can.
3. Change the source code to fix it, with the file tools or the terminal.
4. Check your change, then say that the task is done.

Change source files only: the repository's tests are replaced by hidden tests when your change is checked, so edits of test files are discarded.`

// RepoUserPrompt renders a repository task: the issue ([Task.Statement]) and where the
// repository is. The tools' relative paths and the terminal's working directory are
// the repository's directory; its tests, test patch and gold patch are never shown.
//
//	Resolve the following issue in the repository <name> at <dir>
//	(your working directory; file paths are relative to it).
//
//	## Issue
//	<statement>
//
//	## Instructions
//	1. … 4.
func RepoUserPrompt(t Task) string {
	var b strings.Builder
	b.WriteString("Resolve the following issue in the repository")
	if t.Repo != nil && t.Repo.Name != "" {
		b.WriteString(" " + t.Repo.Name)
	}
	dir := DefaultWorkDir
	if t.Repo != nil {
		dir = t.Repo.Dir()
	}
	b.WriteString(" at " + dir + " (your working directory; file paths are relative to it).\n\n")
	b.WriteString("## Issue\n")
	b.WriteString(strings.TrimRight(t.Statement, "\n"))
	b.WriteString("\n\n## Instructions\n")
	b.WriteString("1. Find the code the issue is about.\n")
	b.WriteString("2. Change the source code so that the issue is resolved; do not edit the tests.\n")
	b.WriteString("3. Check your change by running the code or the existing tests (python3 -m pytest).\n")
	b.WriteString("4. Say that the task is done when it is.\n")
	return b.String()
}

// Package tasks holds the coding tasks agents are asked to solve: the [Task] type, the
// eight built-in tasks ([Builtin]), loaders for JSONL ([LoadJSONL]), Parquet
// ([LoadParquet]) and the Hugging Face Hub ([LoadHub]), a reproducible train/eval split
// ([Split], [BuiltinSplit]), an endless seeded [Source] over the train split ([NewCycle]),
// and the prompts that present a task to the agent ([Prompt]).
//
// # Tasks and their tests
//
// A task carries its canonical test code: a Python script that imports the solution from
// the module solution (the file solution.py in the workspace), asserts, and prints a
// line containing "passed" when every assertion holds. The test code is shown to the
// agent in the prompt; the reward package runs it again after the agent stops, in a
// process of its own that the agent's code cannot reach. [Task.HiddenTests] is more
// test code that the prompt never shows: correctness counts the visible and the hidden
// tests together, so answers hard-coded from the prompt do not pass. A task may also
// (or instead) carry input/output cases ([Task.Cases]): solution.py is then run as a
// program once per case. [Task.ReferenceSolution] is a correct solution for the
// built-in tasks, kept for tests and simulators; it is never shown to the agent.
//
// # Column rules
//
// The loaders read rows the way the Hermes agentic OPD environment reads a Hugging Face
// dataset, with one deliberate change: a fallback column is used when the preferred one
// is absent, null or empty (the original only fell back when the key was absent, so a
// present but empty "prompt" dropped a row whose "task" had text).
//   - Task text: the [LoadConfig.PromptField] column (default "prompt"), else "task".
//     Rows without task text (missing, null, empty or only white space) are skipped and
//     counted in [LoadReport.SkippedNoTask].
//   - Test code: "test_code", else "tests"; rows without tests are kept (the prompt then
//     has no Tests section, and the reward package cannot verify them), but a source
//     in which no task has tests is refused (see below).
//   - Hidden tests: "hidden_tests", test code run after the visible tests and never
//     shown in the prompt ([Task.HiddenTests]).
//   - Input/output cases: "inputs" and "outputs", two lists of strings of the same
//     length, as in code-contest datasets ([Task.Cases]): both or neither (null and
//     empty lists mean none). In Parquet a list is a LIST of strings or a repeated
//     string column; a null element is an error.
//   - Difficulty: "difficulty", else "unknown".
//   - ID: "id" (a string or an integer), else "<source>:<row>".
//
// A value of the wrong type (a number where text belongs, a list, a struct) is an error
// of type [*RowError] that names the file, the row and the column. Rows count from 1; in
// a JSONL file the row is the line number.
//
// # The Hugging Face Hub
//
// [LoadHub] reads a split of a Hub dataset from the Parquet files the Hub converts every
// dataset to: it asks GET {base}/api/datasets/{id}/parquet/{config}/{split} for the list
// of file URLs, downloads each file once into [HubConfig.CacheDir] (atomically, checked
// to be Parquet), and reads them with [LoadParquet]'s rules. A dataset in the cache is
// used without any request, so a process can run offline after one online start. The
// token is passed explicitly ([HubConfig.Token]); nothing is read from the environment.
//
// # Splits
//
// [Split] holds out max(EvalSize, ⌊n·EvalSplitRatio⌋) tasks for evaluation after a
// shuffle seeded by [SplitConfig.Seed], so the same seed gives the same split on every
// run (the original shuffled without a seed). A dataset with no task left for training
// is an error wrapping [ErrDatasetTooSmall]; a small dataset can hold out fewer tasks
// (EvalSize 1, 2, …) or none ([NoEval]). [BuiltinSplit] splits the eight built-in
// tasks 6/2 as the original does.
//
// # Sources that give no usable task
//
// A loader never returns an empty list without an error: a file (or Hub split) with no
// task is an error wrapping [ErrNoTasks], and one in which no task has tests an error
// wrapping [ErrNoTests] (unless [LoadConfig.AllowNoTests]), both naming the file and
// what was read. A program that falls back to the built-in tasks when it is given no
// dataset therefore never trains on them by mistake because a dataset was empty. A
// source in which some tasks have tests loads; the others are counted in
// [LoadReport.NoTests].
//
// # Repository tasks
//
// A task with [Task.Repo] set is a repository task: a repository inside a container
// image, an issue to resolve (Task.Statement), and hidden tests (a test patch and the
// FAIL_TO_PASS and PASS_TO_PASS lists) that decide; the reward package grades it
// (reward.VerifyRepo). [LoadSWE] reads SWE-bench-style JSONL and Parquet files,
// [LoadSWEHub] a Hub split, [LoadHarbor] a Harbor task directory; [SWERow] is one row,
// and its Task method the rules:
//   - FAIL_TO_PASS and PASS_TO_PASS are JSON arrays or strings holding one
//     ([TestList]); an empty FAIL_TO_PASS is refused (no test would decide).
//   - The image is the row's "image" (SWE-bench v5), "image_name" (SWE-smith,
//     SWE-rebench V2) or "docker_image", else SWE-bench's convention
//     (sweb.eval.x86_64.<id with __ as _1776_>); a name without a registry or
//     namespace gets [SWEConfig.ImagePrefix] ([DefaultImagePrefix]). A reference to
//     an image on the local disk ("oci-layout:DIR[:tag]", "docker-archive:FILE") is
//     kept as written, whatever its path looks like.
//   - The test command and log parser are the row's ("test_cmd", "log_parser", or
//     SWE-rebench's "install_config"), else the repository's entry in the
//     specification table ([RepoSpecs], or [SWEConfig.Specs]), with the test
//     patch's test files appended as SWE-bench does (when the entry's
//     AppendTestFiles says so). A row's own test command runs as written, with no
//     file appended: the rows that carry one (SWE-bench v5, SWE-rebench) give the
//     whole command. A repository in neither is refused with an error wrapping
//     [ErrUnknownRepo] that says what to provide; [LoadRepoSpecs] reads entries
//     for [SWEConfig.Specs] from a JSON file.
//   - A SWE-smith row (an "image_name", a "patch" and no "test_patch") becomes a task
//     whose bug patch is applied, and whose FAIL_TO_PASS test files are removed, in
//     one commit before the agent starts ([Repo.Setup], [Repo.HiddenFiles]); its gold
//     fix is the bug patch reversed.
//   - Harbor directories must name a prebuilt image: building Dockerfiles is out of
//     scope. Their grading is this library's, so they must carry SWE-style data in
//     tests/config.json; a verifier that only writes a reward file is refused
//     ([ErrHarborUnsupported]).
//
// # Recognising a source
//
// [DetectFormat] tells which loader reads a file or directory ([Format]): a
// directory with a task.toml (or task directories in it) is Harbor's
// ([LoadHarborDir]); a JSONL or Parquet file whose rows have "instance_id" and
// "FAIL_TO_PASS", "test_patch" or "problem_statement" holds repository tasks
// ([LoadSWE]); one with "prompt" or "task" holds task text and tests ([LoadJSONL],
// [LoadParquet]). Only the first row (or Parquet's schema) is read; a source of none
// of them is an error wrapping [ErrUnknownFormat] that lists its columns.
//
// The prompt of a repository task ([RepoUserPrompt]) is the issue with the
// repository's name and directory; the test patch, the lists and the gold patch are
// never shown.
//
// # Prompts
//
// [Prompt] builds the initial messages: a system prompt ([DefaultSystemPrompt]) and a
// user prompt laid out as in the original ("## Task", "## Tests" with the test code in a
// fenced python block, "## Instructions"). The defaults tell the agent to run python3
// rather than python, since the sandbox provides /usr/bin/python3 and usually no python.
package tasks

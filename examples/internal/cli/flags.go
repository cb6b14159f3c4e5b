package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agentic-opd/agenticopd"
)

// DefaultTopK is the default of every program's -topk: the library's
// (agenticopd.DefaultDistillTopK).
const DefaultTopK = agenticopd.DefaultDistillTopK

// NewFlagSet returns the flag set of the example program name, writing to w: its -h
// prints "name: about", how to run it, and the flags. about says in one sentence
// what the program does.
func NewFlagSet(name, about string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s: %s\n\nUsage: go run ./examples/%s [flags]\n\nFlags:\n", name, about, name)
		fs.PrintDefaults()
	}
	return fs
}

// Usage is the usage text of the flag name: its one meaning in every example
// program ([Meaning]), then, when detail is given, what it means in this program in
// parentheses ("default: …", the files written). It panics for a name that has no
// meaning yet: a new flag gets its meaning in [Meaning]'s table first, so that one
// name never means two things in two programs.
func Usage(name string, detail ...string) string {
	m, ok := Meaning(name)
	if !ok {
		panic(fmt.Sprintf("cli: flag -%s has no meaning in cli.Meaning's table: add it there", name))
	}
	if len(detail) == 0 {
		return m
	}
	return m + " (" + strings.Join(detail, "; ") + ")"
}

// Meaning is the meaning of the flag name across the example programs, or false for
// a name none of them has.
func Meaning(name string) (string, bool) {
	m, ok := meanings()[name]
	return m, ok
}

// FlagNames lists the names [Meaning] knows, sorted.
func FlagNames() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range meanings() {
			if !yield(k) {
				return
			}
		}
	})
}

// meanings is the one table of flag names and what they mean.
func meanings() map[string]string {
	return map[string]string{
		// What the programs read and write.
		"tasks":        TasksUsage,
		"tasks-format": "how -tasks is read: auto (by its columns, or a directory's task.toml), prompt (task text and Python tests: \"prompt\" or \"task\", \"test_code\"), swe (SWE-bench, SWE-Gym, SWE-smith or SWE-rebench rows) or harbor (Harbor task directories)",
		"specs":        "JSON file of repository specifications (SWEConfig.Specs), added to the built-in table: {\"owner/repo\": {\"test_cmd\": \"…\", \"log_parser\": \"pytest\", \"append_test_files\": true}}",
		"image":        "image reference used for every repository task instead of its own",
		"image-cache":  "directory of the image cache that repository tasks' images are pulled and unpacked into",
		"eval-size":    "tasks of a -tasks dataset held out for evaluation, at least (15% of a large one; 0: none, every task trains)",
		"max-tasks":    "tasks of the dataset evaluated at most, in the order -seed shuffles them (0: all of them)",
		"hf-cache":     "cache directory of hf: datasets (default: the user cache directory)",
		"hf-token":     "Hugging Face token for private or gated hf: datasets (default: $" + HFTokenEnv + ")",
		"out":          "directory the program writes its output files to",
		"in":           "JSON Lines of Atropos groups to read",
		"html":         "the HTML page to write",
		"seed":         "seed of the train/eval split and of the task order",

		// The servers.
		"vllm-url":      "vLLM server of the policy, an http:// or https:// URL",
		"model":         "served model name (default: the server's first model)",
		"teacher-url":   "vLLM server of the teacher, an http:// or https:// URL",
		"judge-url":     "vLLM server of the judge, an http:// or https:// URL",
		"topk":          "teacher top-K logprobs per scored token (the teacher server's --max-logprobs must allow it)",
		"show-topk":     "teacher entries shown per position in the page",
		"simulator":     "take the token text from the vllmtest simulator (for groups it produced)",
		"model-url":     "NeMo Gym model server of the policy",
		"tokenizer-url": "vLLM server whose /tokenize renders the policy's chat template",

		// The run.
		"groups":               "number of groups to collect",
		"group-size":           "rollouts per group",
		"deny":                 "comma-separated substrings of the commands the sandbox refuses",
		"concurrency":          "tasks worked on at once",
		"test-timeout":         "timeout of a repository task's test command (default: the task's, else 15m)",
		"task-count":           "built-in tasks sent",
		"repeats":              "rollouts per task (NeMo Gym's num_repeats)",
		"failures":             "how a failed rollout is answered: status (NeMo RL) or row (gym eval run)",
		"rows":                 "write the built-in tasks as NeMo Gym dataset rows to this JSONL file and exit",
		"serve":                "serve /run for NeMo Gym until SIGINT or SIGTERM",
		"addr":                 "host:port to listen on",
		"config-json":          "the JSON view of the agent's config that NeMo Gym's app.py writes: the JSON itself, or a file that holds it",
		"atropos-url":          "Atropos trajectory API, an http:// or https:// URL",
		"spool":                "directory of the spool, where groups wait until the trajectory API takes them",
		"env-name":             "the env's name at the trajectory API (desired_name; the API adds a suffix)",
		"weight":               "the env's weight at the trajectory API: its share of the trainer's batches among envs",
		"max-dropped":          "stop with an error after this many groups in a row were dropped (equal scores, too long); negative: never",
		"metrics-every":        "log the metrics every N groups (0: never)",
		"metrics-addr":         "serve Prometheus metrics at http://HOST:PORT/metrics",
		"log-json":             "write logs as JSON lines",
		"batch-size":           "the in-process trainer's batch size, in sequences",
		"steps":                "the in-process trainer's number of steps",
		"kubeconfig":           "the kubeconfig of the cluster",
		"namespace":            "the namespace of the sandbox pods (the factory needs the Role rollout/sandbox/kube documents there)",
		"helper-image":         "the in-pod helper's image (agenticopd-pod image writes it)",
		"pull-policy":          "the pods' imagePullPolicy: Always, IfNotPresent or Never",
		"trust-network-policy": "the cluster's network plugin enforces NetworkPolicy (else a sandbox without network needs pods that have only a loopback interface)",
		"cpu":                  "each pod's cpu limit and request (a group holds 2×group-size pods at once: its rollouts and their gradings)",
		"memory":               "each pod's memory limit and request",
	}
}

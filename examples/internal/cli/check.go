package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
)

// URL returns a [*FlagError] for flag name when v is set but is not an http or https
// URL with a host: "localhost:8000" (no scheme) would otherwise be read as a URL of
// scheme "localhost" and fail later with a confusing error.
func URL(name, v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return nil
	}
	reason := "a URL with its scheme, like http://" + v
	if strings.Contains(v, "://") {
		reason = "an http:// or https:// URL with a host"
	}
	return &FlagError{Flag: name, Value: v, Reason: reason}
}

// HFTokenEnv is the environment variable [HFToken] reads, as the Hugging Face tools do.
const HFTokenEnv = "HF_TOKEN"

// HFToken is the Hugging Face token: the flag's value when set, else $HF_TOKEN.
func HFToken(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(HFTokenEnv)
}

// SplitTasks splits a loaded dataset for a program's -eval-size flag: evalSize tasks
// (at least; 15% of a large dataset) held out for evaluation, none when it is 0. A
// dataset too small for it is a [*FlagError] for -eval-size that says how many tasks
// there are. (Above 66 tasks the 15% share is more than evalSize: then it is that share.)
func SplitTasks(ts []tasks.Task, evalSize int, seed uint64) (train, eval []tasks.Task, err error) {
	size := evalSize
	if size == 0 {
		size = tasks.NoEval
	}
	train, eval, err = tasks.Split(ts, tasks.SplitConfig{Seed: seed, EvalSize: size})
	if errors.Is(err, tasks.ErrDatasetTooSmall) {
		return nil, nil, &FlagError{Flag: "eval-size", Value: evalSize,
			Reason: fmt.Sprintf("at most %d for a dataset of %d tasks, so that some are left to train on (0 holds out none)", max(len(ts)-1, 0), len(ts))}
	}
	return train, eval, err
}

// CheckTopK checks k against the teacher server's --max-logprobs once, at start-up
// ([vllm.CheckTopK]), so that a lower cap stops the program before any rollout, with
// an error that names flag (a [*FlagError]) and says both ways out. Other failures
// (the server down) are returned as they are, wrapped with the URL.
func CheckTopK(ctx context.Context, teacher *vllm.Client, flag string, k int) error {
	err := vllm.CheckTopK(ctx, teacher, k)
	var me *vllm.MaxLogprobsError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &me):
		return &FlagError{Flag: flag, Value: k, Reason: fmt.Sprintf("at most %d, the --max-logprobs of the teacher server at %s (or start that server with --max-logprobs %d or more)",
			me.Max, teacher.BaseURL(), k)}
	default:
		return fmt.Errorf("checking -%s %d against the teacher server at %s: %w", flag, k, teacher.BaseURL(), err)
	}
}

// EnforcementAttrs describes how f holds a rollout's limits, for a start-up log line.
func EnforcementAttrs(f *bwrap.Factory) []any {
	if f.Unconfined() {
		return []any{"sandbox", "UNCONFINED (scripted commands only)"}
	}
	e := f.Enforcement()
	cg := string(e.Cgroup)
	if cg == "" || e.Cgroup == bwrap.CgroupNone {
		cg = "none: limits per process only (" + e.CgroupMissing + ")"
	}
	return []any{"sandbox", "bubblewrap", "sandbox_cgroup", cg, "sandbox_storage", string(e.Storage)}
}

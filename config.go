package agenticopd

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd/judge"
	"github.com/agentic-opd/agenticopd/opd"
	"github.com/agentic-opd/agenticopd/reward"
	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/sampling"
	"github.com/agentic-opd/agenticopd/scorer"
	"github.com/agentic-opd/agenticopd/tasks"
)

// Defaults of [Config]. The reference's names are in parentheses.
const (
	DefaultGroupSize             = 4                                // group_size
	DefaultMaxTurns              = 15                               // max_agent_turns
	DefaultMaxTokens             = 2048                             // max_token_length, per turn
	DefaultTemperature           = 1.0                              // agent_temperature
	DefaultDistillTopK           = opd.DefaultTopK                  // teacher top-k per position
	DefaultPRMVotes              = judge.DefaultPRMVotes            // judge votes per turn pair
	DefaultHintMaxNextStateChars = opd.DefaultHintMaxNextStateChars // next-state chars shown to the judge
	DefaultMaxRollouts           = 8                                // Config.MaxRollouts
	DefaultMaxGroups             = 2                                // Config.MaxGroups
	DefaultMaxTeacherRequests    = 2                                // Config.MaxTeacherRequests
	DefaultPollInterval          = 100 * time.Millisecond           // Config.PollInterval
	DefaultStatusTimeout         = 2 * time.Minute                  // Config.StatusTimeout
)

// Config configures an [Env]. Policy is required; the zero value of every other field
// is the documented default.
type Config struct {
	// Policy is the student: the inference engine the agents talk to. Required.
	// A *vllm.Client or *vllm.Pool also serves as the default Teacher and judge model.
	Policy rollout.Policy

	// Teacher scores the student's tokens with hints. Nil means the Policy itself when
	// it implements [scorer.LogprobScorer] (the reference's choice); set a separate
	// client for a frozen teacher. The teacher must share the student's tokenizer.
	Teacher scorer.LogprobScorer
	// Judge finds hindsight hints. Nil means an LLM judge ([judge.NewLLM]) on
	// JudgeModel with PRMVotes votes and the Majority selection.
	Judge judge.Judge
	// TeacherMaxLen is the longest sequence the teacher accepts: hinted turns past it
	// are left unscored (opd/teacher_too_long) rather than failing the group. Zero
	// means the policy server's max_model_len − 1 (one token for the scoring request's
	// generation) when the teacher is the policy, and no limit for another teacher.
	TeacherMaxLen int
	// JudgeModel is the chat endpoint of the default judge. Nil means the Policy
	// itself when it implements [judge.ChatModel] (the reference's choice).
	JudgeModel judge.ChatModel
	// SandboxFactory makes one sandbox per rollout, and one more per verification
	// for the tests. Its sandboxes must implement [rollout.Starter] (a wrapper must
	// forward Start, and Restore and Dir() where the wrapped sandbox has them), or
	// every verification fails with [reward.ErrNoStarter]. Nil
	// means the bubblewrap sandbox with its defaults (rollout/sandbox/bwrap), created and
	// probed on first use. A factory that implements [rollout.Prestarter] (the
	// Kubernetes one, rollout/sandbox/kube) is asked, each time the env draws a
	// training task, to start the sandboxes of the task after it (2×GroupSize: its
	// rollouts' and their grading's), so that they start while the drawn task's group
	// runs; the env then holds that next task until its next draw.
	SandboxFactory rollout.SandboxFactory
	// Images gives the root file systems of repository tasks' images ([tasks.Repo];
	// package images' Cache is one) to the default sandbox factory. A repository task
	// needs a SandboxFactory that implements [rollout.SpecFactory] with an image
	// source: the default one with Images set, or one of the caller's (then Images
	// must be nil: NewEnv refuses both; a wrapper of the caller's must forward
	// NewSandboxFor). NewEnv refuses a Dataset or EvalTasks holding a repository
	// task when neither is there; tasks of a Config.Tasks source cannot be seen
	// ahead, and their rollouts then fail with [ErrNoSpecFactory].
	Images bwrap.RootSource
	// Reward scores a verified rollout. Nil means [reward.Default] with Weights.
	Reward reward.Reward
	// Weights are the weights of the default reward (correctness 0.7, efficiency 0.15,
	// tool use 0.15 when zero).
	Weights reward.Weights

	// Dataset is every task of the run. Nil means the eight built-in tasks, split 6
	// train / 2 eval by Seed; other datasets are split by EvalSize and
	// EvalSplitRatio.
	Dataset []tasks.Task
	// Tasks is the stream of training tasks. Nil means the train split of Dataset,
	// cycled forever in an order shuffled per pass by Seed.
	Tasks tasks.Source
	// EvalTasks are the tasks Evaluate runs. Nil means the eval split of Dataset.
	EvalTasks []tasks.Task
	// EvalSize and EvalSplitRatio size the eval split (eval_size 10,
	// eval_split_ratio 0.15 when zero). EvalSize [tasks.NoEval] holds out none, so a
	// dataset of any size trains (Evaluate then has no task).
	EvalSize       int     // smallest number of eval tasks ([tasks.SplitConfig])
	EvalSplitRatio float64 // share of the tasks held out for eval, in [0, 1)
	// Seed seeds the train/eval split and the task order. The policy's sampling is
	// not seeded unless SeedSampling is set.
	Seed uint64
	// SeedSampling seeds every generation request of a training rollout from Seed:
	// rollout i of the group drawn n-th gets a seed derived from Seed and n, plus i,
	// on every turn, so that each rollout of a group has a seed of its own (one seed for
	// all would make rollouts that share their prompt identical) and a server that
	// honours seeds (vLLM, vllmtest) samples the same rollouts again. With Process,
	// whose groups are numbered in the order their tasks are drawn, the same Seed and
	// the same server give the same output (see Process); CollectGroup and Serve
	// number groups in the order they start. Off by default: vLLM samples a request
	// with a seed of its own on a slower path. Eval rollouts (greedy) are not seeded.
	SeedSampling bool
	// Prompt builds the first messages of a rollout; the zero value is
	// [tasks.DefaultSystemPrompt] and [tasks.UserPrompt]: the original's structure and
	// steps, in this library's own words (not the original's exact text).
	Prompt tasks.Prompt

	// GroupSize is the number of rollouts per task (4 when zero).
	GroupSize int
	// MaxTurns bounds each rollout's policy calls (15 when zero).
	MaxTurns int
	// MaxTokens bounds each turn's generation (2048 when zero).
	MaxTokens int
	// Temperature is the agents' sampling temperature (1.0 when zero, the reference's
	// agent_temperature). Evaluate always decodes greedily.
	Temperature float64
	// TopP, TopK, MinP, RepetitionPenalty, PresencePenalty and FrequencyPenalty are the
	// agents' other sampling parameters; their zero values are off (no truncation, no
	// penalty; see package sampling for ranges). Every policy request states each of
	// them, so a server's --generation-config defaults never apply, and the group's
	// generation_params record them.
	TopP              float64 // nucleus-sampling mass
	TopK              int     // top-k cutoff
	MinP              float64 // min-p cutoff
	RepetitionPenalty float64 // vLLM's repetition penalty
	PresencePenalty   float64 // OpenAI presence penalty
	FrequencyPenalty  float64 // OpenAI frequency penalty
	// AllowLogprobMismatch accepts sampling settings under which the logprobs the
	// server reports are not those of the distribution the tokens were drawn from: a
	// Temperature other than 1, any truncation, any penalty. vLLM reports raw logprobs
	// by default (--logprobs-mode raw_logprobs), so such a run hands the trainer
	// inference_logprobs of another distribution than the one sampled, which skews
	// importance ratios. NewEnv refuses those settings unless this is set.
	AllowLogprobMismatch bool
	// JudgeSampling is the default judge's sampling ([judge.LLMConfig.Sampling]: a zero
	// Temperature means 0.7, the reference's; other zero values are off). The judge's
	// output is not trained on, so no setting is refused.
	JudgeSampling sampling.Params
	// JudgeMaxTokens bounds each judge vote's output (500 when zero, the reference's).
	// A vote cut there is never read (counted as judge/truncated_votes).
	JudgeMaxTokens int
	// JudgeChatTemplateKwargs are sent with every judge request. Nil means
	// {"enable_thinking": false}: thinking off where the template supports it, since a
	// thinking judge behind a reasoning parser answers with no content (counted as
	// judge/empty_content). An empty non-nil map sends {}.
	JudgeChatTemplateKwargs map[string]any
	// Tools are the agents' tools; nil means [rollout.DefaultTools].
	Tools []rollout.Tool
	// ChatTemplateKwargs are sent with every render (for example enable_thinking).
	ChatTemplateKwargs map[string]any
	// ExtraCloses are end-of-turn ids the model may stop on besides the template's close
	// (for Qwen, <|endoftext|> 151643: generation_config's second eos id). They are
	// accepted as closes and refused as literals inside tool output.
	ExtraCloses []int32
	// VerifyTimeout bounds the verification of a rollout (30 s when zero); input/output
	// cases get it plus reward.DefaultCaseBudget per case (see reward.VerifyOptions).
	VerifyTimeout time.Duration
	// RepoTestTimeout bounds the test command of a repository task that names no
	// timeout of its own (reward.DefaultTestTimeout when zero).
	RepoTestTimeout time.Duration

	// DisableOPD turns the distillation step off (the reference's opd_enabled is true
	// by default; the Go name is inverted so that the zero value keeps the default).
	DisableOPD bool
	// DistillTopK is the number of teacher entries per scored position (50 when zero).
	// The teacher server must allow it (vLLM's --max-logprobs).
	DistillTopK int
	// PRMVotes is the number of judge votes per turn (3 when zero).
	PRMVotes int
	// HintMaxNextStateChars cuts each next-state message shown to the judge (4000 when
	// zero).
	HintMaxNextStateChars int
	// Placement is where hints go in the teacher's input; the zero value is
	// [opd.Inline].
	Placement opd.Placement
	// TeacherLogprobsAsRef writes the teacher's logprob of each sampled token to
	// ref_logprobs (1.0 where no teacher row exists, as inference_logprobs marks
	// masked positions). Off by default.
	TeacherLogprobsAsRef bool

	// KeepEqualScores keeps groups whose scores are all equal. By default CollectGroup
	// marks them dropped before any judge or teacher request, as Atropos's
	// ensure_scores_are_not_same (true by default) would drop them anyway. Process
	// always keeps them, as Atropos's process mode does.
	KeepEqualScores bool
	// MaxDroppedInARow stops Serve with an error wrapping [ErrDroppedInARow] once this
	// many groups in a row were dropped (see [Group.Dropped]) and none sent: tasks
	// without tests, or a policy that never or always solves them, would otherwise keep
	// the servers busy for nothing. Serve warns at 10, 20, 40, … in a row before that.
	// Zero means DefaultMaxDroppedInARow (100); negative never stops (it still warns).
	MaxDroppedInARow int
	// MaxTokenLen is the trainer's max token length: a group with a sequence at least
	// this long is dropped before OPD. Zero means no limit; Serve takes it from the
	// trajectory API when zero.
	MaxTokenLen int

	// MaxRollouts bounds the rollouts in flight across all groups (8 when zero). A
	// rollout holds one sandbox, and a second one for the tests while it is verified.
	MaxRollouts int
	// MaxGroups bounds the groups Serve and Process work on at once (2 when zero).
	MaxGroups int
	// MaxTeacherRequests bounds the teacher requests in flight across all groups (2
	// when zero). A teacher's answer carries the top-K logprobs of every position of
	// its prompt (vLLM cannot return fewer): about 50 MB of JSON per 16k-token sequence
	// at K = 50, which the vllm client decodes as it arrives into arrays of about a
	// fifth of that. The bound keeps that memory, and the teacher's load, bounded however
	// many groups are collected at once; a group waiting for its turn holds only its
	// trajectories.
	MaxTeacherRequests int
	// PollInterval is the wait between back-pressure polls in Serve (100 ms when zero,
	// as Atropos's BaseEnv).
	PollInterval time.Duration
	// StatusTimeout is how long Serve waits for the trajectory API to answer a status
	// poll before it gives up with an error (2 minutes when zero). An API that was
	// restarted or reset no longer knows this env and answers every poll with an
	// error; a supervisor that restarts the process then re-registers it and replays
	// its spool, as Atropos's BaseEnv, which exits after three failed polls, relies on.
	StatusTimeout time.Duration

	// OnGroup, when set, is called with every group Process and Serve finish, one call
	// at a time.
	OnGroup func(*Group)
	// ReportPath, when set, is a file Process writes an HTML page of its groups to
	// (package report; by convention report.html next to groups.jsonl).
	ReportPath string
	// Logger receives progress and failures; nil means no logging.
	Logger *slog.Logger
}

// ErrInvalidConfig is wrapped by NewEnv's error for a Config it cannot use.
var ErrInvalidConfig = errors.New("agenticopd: invalid Config")

// validate refuses negative sizes and durations: zero means the default, and a
// negative value is a mistake, not a request for the default.
func (c Config) validate() error {
	evalSize := c.EvalSize
	if evalSize == tasks.NoEval {
		evalSize = 0 // none held out: not a negative size
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"GroupSize", float64(c.GroupSize)}, {"MaxTurns", float64(c.MaxTurns)},
		{"MaxTokens", float64(c.MaxTokens)}, {"Temperature", c.Temperature},
		{"DistillTopK", float64(c.DistillTopK)}, {"PRMVotes", float64(c.PRMVotes)},
		{"HintMaxNextStateChars", float64(c.HintMaxNextStateChars)},
		{"TeacherMaxLen", float64(c.TeacherMaxLen)}, {"MaxTokenLen", float64(c.MaxTokenLen)},
		{"MaxRollouts", float64(c.MaxRollouts)}, {"MaxGroups", float64(c.MaxGroups)},
		{"MaxTeacherRequests", float64(c.MaxTeacherRequests)},
		{"EvalSize", float64(evalSize)}, {"EvalSplitRatio", c.EvalSplitRatio},
		{"VerifyTimeout", float64(c.VerifyTimeout)}, {"PollInterval", float64(c.PollInterval)},
		{"RepoTestTimeout", float64(c.RepoTestTimeout)},
		{"StatusTimeout", float64(c.StatusTimeout)},
	} {
		if f.v < 0 || math.IsNaN(f.v) {
			return fmt.Errorf("%w: %s is %v; zero means the default", ErrInvalidConfig, f.name, f.v)
		}
	}
	if c.Images != nil && c.SandboxFactory != nil {
		return fmt.Errorf("%w: Images configures the default sandbox factory and would be ignored beside a SandboxFactory; "+
			"give the image source to your factory (bwrap.Config.Images) and leave Images nil; a wrapper of that factory "+
			"must forward NewSandboxFor (rollout.SpecFactory)", ErrInvalidConfig)
	}
	if err := c.checkRepoSandboxes(); err != nil {
		return err
	}
	if c.EvalSplitRatio >= 1 {
		return fmt.Errorf("%w: EvalSplitRatio is %v; want [0, 1)", ErrInvalidConfig, c.EvalSplitRatio)
	}
	if c.JudgeMaxTokens < 0 {
		return fmt.Errorf("%w: JudgeMaxTokens is %d; zero means the default", ErrInvalidConfig, c.JudgeMaxTokens)
	}
	p := c.withDefaults().policySampling()
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	js := c.JudgeSampling
	js.Temperature = max(js.Temperature, 0) // negative asks for greedy
	if err := js.Validate(); err != nil {
		return fmt.Errorf("%w: JudgeSampling: %w", ErrInvalidConfig, err)
	}
	if mm := p.Mismatches(); len(mm) > 0 && !c.AllowLogprobMismatch {
		return fmt.Errorf("%w: sampling with %s makes the policy's reported logprobs (raw in vLLM by default) differ from the distribution the tokens are drawn from, so the trainer's inference_logprobs would be wrong; use Temperature 1 with no truncation and no penalty, or set AllowLogprobMismatch to accept it",
			ErrInvalidConfig, strings.Join(mm, ", "))
	}
	return nil
}

// checkRepoSandboxes refuses a configuration whose Dataset or EvalTasks hold a
// repository task that the sandbox factory cannot serve: a SandboxFactory that does
// not implement [rollout.SpecFactory] (a wrapper that does not forward
// NewSandboxFor), or the default factory without Images. Without this the first
// repository rollout would fail, long after start. Tasks from Config.Tasks (a
// Source) cannot be seen here; their rollouts fail with [ErrNoSpecFactory].
func (c Config) checkRepoSandboxes() error {
	var repo *tasks.Task
	for _, ts := range [][]tasks.Task{c.Dataset, c.EvalTasks} {
		for i := range ts {
			if ts[i].Repo != nil {
				repo = &ts[i]
				break
			}
		}
		if repo != nil {
			break
		}
	}
	switch {
	case repo == nil:
		return nil
	case c.SandboxFactory == nil && c.Images == nil:
		return fmt.Errorf("%w: task %s is a repository task, whose sandboxes are made from its image (%s): "+
			"set Images (an images.Cache) for the default sandbox factory", ErrInvalidConfig, repo.ID, repo.Repo.Image)
	case c.SandboxFactory == nil:
		return nil
	}
	if _, ok := c.SandboxFactory.(rollout.SpecFactory); !ok {
		return fmt.Errorf("%w: task %s is a repository task, whose sandboxes are made from its image (%s), but the "+
			"SandboxFactory (%T) does not implement rollout.SpecFactory: a wrapper must forward NewSandboxFor to the "+
			"factory it wraps (one with an image source: bwrap.Config.Images)", ErrInvalidConfig, repo.ID, repo.Repo.Image, c.SandboxFactory)
	}
	return nil
}

// policySampling is the agents' sampling, from the Config's fields.
func (c Config) policySampling() sampling.Params {
	return sampling.Params{
		Temperature: c.Temperature, TopP: c.TopP, TopK: c.TopK, MinP: c.MinP,
		RepetitionPenalty: c.RepetitionPenalty, PresencePenalty: c.PresencePenalty, FrequencyPenalty: c.FrequencyPenalty,
	}
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.GroupSize, DefaultGroupSize)
	def(&c.MaxTurns, DefaultMaxTurns)
	def(&c.MaxTokens, DefaultMaxTokens)
	def(&c.DistillTopK, DefaultDistillTopK)
	def(&c.PRMVotes, DefaultPRMVotes)
	def(&c.HintMaxNextStateChars, DefaultHintMaxNextStateChars)
	def(&c.MaxRollouts, DefaultMaxRollouts)
	def(&c.MaxGroups, DefaultMaxGroups)
	def(&c.MaxTeacherRequests, DefaultMaxTeacherRequests)
	if c.Temperature <= 0 {
		c.Temperature = DefaultTemperature
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.StatusTimeout <= 0 {
		c.StatusTimeout = DefaultStatusTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Command nemogym-agent serves the OPD environment as a NeMo Gym agent server, for
// NeMo RL and the other trainers that drive NeMo Gym (POST /run: one rollout, scored,
// with token fields and teacher rows on its output items).
//
// With no flags it runs offline in one command: the vllmtest simulator (a scripted
// test and demo backend, not a language model) plays the policy, the judge and the
// teacher; nemogymtest's model server stands in for NeMo Gym's model server in front
// of the trainer; its collector sends 2 tasks × 4 repeats to this agent server as NeMo
// Gym's standalone collector does; the answers are written as NeMo Gym rollouts JSON
// Lines and put through NeMo RL's post-processing checks. The sandbox, the Python
// tests, the reward, the judge parsing and the teacher rows are real.
//
//	go run ./examples/nemogym-agent -out nemogym-out
//
// With -serve it is the agent server NeMo Gym launches (see README.md: the YAML and
// the app.py entrypoint for ng_run / gym env start), listening until SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/nemogym"
	"github.com/agentic-opd/agenticopd/nemogym/nemogymtest"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm"
)

func main() { cli.Main("nemogym-agent", run) }

type options struct {
	out                  string
	tasks, repeats, topK int
	serve                bool
	addr, configJSON     string
	modelURL, tokURL     string
	teacherURL, judgeURL string
	failures             string
	rows                 string
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("nemogym-agent", "the env as a NeMo Gym agent server for NeMo RL: offline, a run through fakes of NeMo Gym's collector and model server; with -serve, /run for a real NeMo Gym", stdout)
	var o options
	fs.StringVar(&o.out, "out", "nemogym-out", cli.Usage("out", "offline: rollouts.jsonl, rollouts_failures.jsonl"))
	fs.IntVar(&o.tasks, "task-count", 2, cli.Usage("task-count", "offline"))
	fs.IntVar(&o.repeats, "repeats", 4, cli.Usage("repeats", "offline"))
	fs.IntVar(&o.topK, "topk", cli.DefaultTopK, cli.Usage("topk"))
	fs.BoolVar(&o.serve, "serve", false, cli.Usage("serve"))
	fs.StringVar(&o.addr, "addr", "", cli.Usage("addr", "serve; default: the config's host and port"))
	fs.StringVar(&o.configJSON, "config-json", "", cli.Usage("config-json", "serve; default: $GO_AGENT_CONFIG_JSON"))
	fs.StringVar(&o.modelURL, "model-url", "", cli.Usage("model-url", "serve; default: the config's model_server"))
	fs.StringVar(&o.tokURL, "tokenizer-url", "", cli.Usage("tokenizer-url", "serve; the trainer's server; default: the config's policy_base_url"))
	fs.StringVar(&o.teacherURL, "teacher-url", "", cli.Usage("teacher-url", "serve; default: the config's teacher_url"))
	fs.StringVar(&o.judgeURL, "judge-url", "", cli.Usage("judge-url", "serve; default: the config's judge_url"))
	fs.StringVar(&o.rows, "rows", "", cli.Usage("rows"))
	fs.StringVar(&o.failures, "failures", "status", cli.Usage("failures"))
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := errors.Join(cli.AtLeast("task-count", o.tasks, 1), cli.AtLeast("repeats", o.repeats, 1), cli.AtLeast("topk", o.topK, 1)); err != nil {
		return err
	}
	failures, err := parseFailures(o.failures)
	if err != nil {
		return err
	}
	if o.rows != "" {
		return writeRows(o.rows, tasks.Builtin(), stdout)
	}
	if o.serve {
		return serve(ctx, o, failures, stdout)
	}
	return offline(ctx, o, failures, stdout)
}

func parseFailures(s string) (nemogym.Failures, error) {
	switch s {
	case "status":
		return nemogym.FailStatus, nil
	case "row":
		return nemogym.FailRow, nil
	}
	return 0, &cli.FlagError{Flag: "failures", Value: s, Reason: "status or row"}
}

// env builds the Env whose policy generates through the model server at modelURL.
func env(modelURL, tokURL string, teacher, judgeModel *vllm.Client, topK int, sandboxes agenticopd.Config) (*agenticopd.Env, *nemogym.Policy, error) {
	tok, err := vllm.NewClient(tokURL)
	if err != nil {
		return nil, nil, err
	}
	policy, err := nemogym.NewPolicy(nemogym.PolicyConfig{ModelURL: modelURL, Tokenizer: tok})
	if err != nil {
		return nil, nil, err
	}
	cfg := sandboxes
	cfg.Policy, cfg.Teacher, cfg.JudgeModel, cfg.DistillTopK = policy, teacher, judgeModel, topK
	e, err := agenticopd.NewEnv(cfg)
	return e, policy, err
}

func offline(ctx context.Context, o options, failures nemogym.Failures, stdout io.Writer) error {
	if _, err := os.Stat(cli.Python); err != nil {
		_, err = cli.Sandbox(ctx, true, stdout)
		return err
	}
	sim, err := scripted.Start(o.topK)
	if err != nil {
		return err
	}
	defer sim.Close()
	fmt.Fprintln(stdout, scripted.Banner(sim, "the policy behind a fake NeMo Gym model server, the judge and the teacher"))
	model, err := nemogymtest.StartModelServer(nemogymtest.ModelConfig{
		Backend: sim.Client(), EOS: sim.Tokenize("<|im_end|>")[0], Temperature: 1, TopP: 1,
	})
	if err != nil {
		return err
	}
	defer model.Close()
	sandboxes, err := cli.Sandbox(ctx, true, stdout)
	if err != nil {
		return err
	}
	all := tasks.Builtin()
	if o.tasks > len(all) {
		return &cli.FlagError{Flag: "task-count", Value: o.tasks, Reason: fmt.Sprintf("at most %d (the built-in tasks)", len(all))}
	}
	e, policy, err := env(model.URL, model.URL, sim.Client(), sim.Client(), o.topK, agenticopd.Config{
		SandboxFactory: sandboxes, GroupSize: o.repeats, MaxRollouts: 8,
	})
	if err != nil {
		return err
	}
	defer policy.CloseIdleConnections()
	agent, err := nemogym.NewServer(nemogym.Config{Runner: e, Tasks: all, Failures: failures})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: agent, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		agent.Wait()
	}()
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "agent server: %s; fake model server: %s\n", url, model.URL)

	rows := datasetRows(all[:o.tasks])
	col := nemogymtest.Collector{AgentURL: url, Driver: nemogymtest.Standalone}
	runs, failed, err := col.Run(ctx, rows, o.repeats)
	if err != nil {
		return err
	}
	if err := write(o.out, runs, failed); err != nil {
		return err
	}
	var checks []error
	for _, r := range runs {
		checks = append(checks, nemogymtest.CheckResult(r.Raw))
		summarize(stdout, r)
	}
	checks = append(checks, nemogymtest.CheckGroups(runs, o.repeats))
	if err := errors.Join(checks...); err != nil {
		return fmt.Errorf("NeMo RL's checks fail: %w", err)
	}
	fmt.Fprintf(stdout, "\n%d rollouts (%d failed) in %s; every NeMo RL post-processing check passes\n",
		len(runs), len(failed), filepath.Join(o.out, "rollouts.jsonl"))
	return nil
}

// datasetRows are NeMo Gym dataset rows for ts: the task under "task", the
// statement as the input, the agent by its instance name. NeMo RL overwrites
// temperature and top_p with its own; the standalone collector sends them as given.
func datasetRows(ts []tasks.Task) []map[string]any {
	var rows []map[string]any
	for _, t := range ts {
		row := nemogym.TaskFields(t)
		row["responses_create_params"] = map[string]any{
			"input": []any{map[string]any{"role": "user", "content": t.Statement}}, "temperature": 1.0, "top_p": 1.0,
		}
		row["agent_ref"] = map[string]any{"name": "agentic_opd_go_agent"}
		rows = append(rows, row)
	}
	return rows
}

func writeRows(path string, ts []tasks.Task, stdout io.Writer) error {
	rows := datasetRows(ts)
	values := make([]any, len(rows))
	for i, r := range rows {
		values[i] = r
	}
	if err := writeLines(path, values); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d rows to %s\n", len(ts), path)
	return nil
}

// write writes the rollouts and failures files as NeMo Gym's collector names them.
func write(dir string, runs, failed []nemogymtest.Run) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, rs := range map[string][]nemogymtest.Run{"rollouts.jsonl": runs, "rollouts_failures.jsonl": failed} {
		values := make([]any, len(rs))
		for i, r := range rs {
			values[i] = r.Result
		}
		if err := writeLines(filepath.Join(dir, name), values); err != nil {
			return err
		}
	}
	return nil
}

// writeLines writes values to path as JSON Lines through nemogym's writer.
func writeLines(path string, values []any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := nemogym.NewWriter(f)
	for _, v := range values {
		b, err := json.Marshal(v)
		if err == nil {
			err = w.WriteLine(b)
		}
		if err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// summarize prints one line per rollout: its indices, reward and parts, model calls
// and the generated tokens that carry teacher rows.
func summarize(w io.Writer, r nemogymtest.Run) {
	var res struct {
		Task       int64              `json:"_ng_task_index"`
		Rollout    int64              `json:"_ng_rollout_index"`
		Reward     float64            `json:"reward"`
		Components map[string]float64 `json:"reward_components"`
		Response   struct {
			Output []nemogym.Item `json:"output"`
		} `json:"response"`
	}
	if err := json.Unmarshal(r.Raw, &res); err != nil {
		fmt.Fprintf(w, "  unreadable answer: %v\n", err)
		return
	}
	res.Task, res.Rollout = intOf(r.Result["_ng_task_index"]), intOf(r.Result["_ng_rollout_index"])
	calls, tokens, rows := 0, 0, 0
	for _, it := range res.Response.Output {
		if it.TokenInfo != nil {
			calls++
			tokens += len(it.GenerationTokenIDs)
		}
		if it.TeacherRows != nil {
			for _, row := range it.TeacherRows.TokenIDs {
				if len(row) > 0 {
					rows++
				}
			}
		}
	}
	fmt.Fprintf(w, "  task %d rollout %d: reward %.3f (correctness %.2f + efficiency %.2f + tool_use %.2f), %d model calls, %d generated tokens, %d with teacher rows\n",
		res.Task, res.Rollout, res.Reward, res.Components["correctness"], res.Components["efficiency"], res.Components["tool_use"], calls, tokens, rows)
}

func intOf(raw json.RawMessage) int64 {
	var n int64
	_ = json.Unmarshal(raw, &n)
	return n
}

// view is the JSON app.py hands over: this server's block, the addresses of the
// servers it references, and the trainer's URLs.
type view struct {
	Self struct {
		Name        string `json:"name"`
		Host        string `json:"host"`
		Port        int    `json:"port"`
		ModelServer struct {
			Name string `json:"name"`
		} `json:"model_server"`
		TeacherURL string `json:"teacher_url"`
		JudgeURL   string `json:"judge_url"`
		Failures   string `json:"failures"`
	} `json:"self"`
	Addrs map[string]struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	} `json:"addrs"`
	PolicyBaseURL json.RawMessage `json:"policy_base_url"`
}

// readView reads -config-json: the JSON itself (it starts with "{"), or a file that
// holds it; "" is the empty view.
func readView(raw string) (view, error) {
	var v view
	if strings.TrimSpace(raw) == "" {
		return v, nil
	}
	data, source := []byte(raw), "the JSON"
	if !strings.HasPrefix(strings.TrimSpace(raw), "{") {
		b, err := os.ReadFile(raw)
		if err != nil {
			return v, &cli.FlagError{Flag: "config-json", Value: raw, Reason: "the JSON app.py writes, or a file that holds it: " + err.Error()}
		}
		data, source = b, raw
	}
	if err := json.Unmarshal(data, &v); err != nil {
		value := "(the JSON given)"
		if source != "the JSON" {
			value = raw
		}
		return v, &cli.FlagError{Flag: "config-json", Value: value, Reason: "the JSON view app.py writes: " + err.Error()}
	}
	return v, nil
}

func serve(ctx context.Context, o options, failures nemogym.Failures, stdout io.Writer) error {
	raw := o.configJSON
	if raw == "" {
		raw = os.Getenv("GO_AGENT_CONFIG_JSON")
	}
	v, err := readView(raw)
	if err != nil {
		return err
	}
	if o.addr == "" && v.Self.Port != 0 {
		o.addr = net.JoinHostPort(v.Self.Host, fmt.Sprint(v.Self.Port))
	}
	if a, ok := v.Addrs[v.Self.ModelServer.Name]; o.modelURL == "" && ok {
		o.modelURL = fmt.Sprintf("http://%s", net.JoinHostPort(a.Host, fmt.Sprint(a.Port)))
	}
	if o.tokURL == "" {
		o.tokURL = policyURL(v.PolicyBaseURL)
	}
	o.teacherURL, o.judgeURL = or(o.teacherURL, v.Self.TeacherURL), or(o.judgeURL, v.Self.JudgeURL)
	if v.Self.Failures != "" && o.failures == "status" {
		var err error
		if failures, err = parseFailures(v.Self.Failures); err != nil {
			return err
		}
	}
	var missing []string
	for name, val := range map[string]string{"addr": o.addr, "model-url": o.modelURL, "tokenizer-url": o.tokURL, "teacher-url": o.teacherURL, "judge-url": o.judgeURL} {
		if val == "" {
			missing = append(missing, "-"+name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return &cli.FlagError{Flag: strings.TrimPrefix(missing[0], "-"), Value: `""`, Reason: "set for -serve, as are " + strings.Join(missing, ", ") + " (flags or the config JSON)"}
	}
	teacher, err := vllm.NewClient(o.teacherURL)
	if err != nil {
		return err
	}
	// Before any rollout: a teacher that cannot give -topk logprobs fails every hint.
	if err := cli.CheckTopK(ctx, teacher, "topk", o.topK); err != nil {
		return err
	}
	judgeModel, err := vllm.NewClient(o.judgeURL)
	if err != nil {
		return err
	}
	sandboxes, err := cli.Sandbox(ctx, false, stdout)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stdout, nil))
	e, policy, err := env(o.modelURL, o.tokURL, teacher, judgeModel, o.topK, agenticopd.Config{SandboxFactory: sandboxes, Logger: log})
	if err != nil {
		return err
	}
	defer policy.CloseIdleConnections()
	agent, err := nemogym.NewServer(nemogym.Config{Runner: e, Failures: failures, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	// No read or write deadline: a rollout lasts as long as it lasts. Idle
	// connections outlive NeMo Gym's 15 s keep-alive.
	srv := &http.Server{Handler: agent, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("nemogym agent server listening", "addr", ln.Addr().String(), "model_server", o.modelURL, "tokenizer", o.tokURL)
	ctx, stop := orphaned(ctx)
	defer stop()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	agent.Wait()
	return err
}

// policyURL is the first of NeMo RL's policy_base_url (a string or a list), without
// its /v1: the trainer serves /tokenize at the root.
func policyURL(raw json.RawMessage) string {
	var one string
	if json.Unmarshal(raw, &one) != nil {
		var many []string
		if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
			one = many[0]
		}
	}
	return strings.TrimSuffix(strings.TrimSuffix(one, "/"), "/v1")
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// orphaned returns ctx that also ends when this process's parent exits (the launcher
// died without signalling us), checked every second.
func orphaned(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	parent := os.Getppid()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != parent {
					cancel()
					return
				}
			}
		}
	}()
	return ctx, cancel
}

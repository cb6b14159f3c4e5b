// Command k8s-sandbox runs one group of repository rollouts with every sandbox a
// Kubernetes pod: the toy repository task "add" (testdata/swe/tasks.jsonl), its
// rollouts and their grading each in a pod of the task's image, commands and files
// reaching the pods only by exec through the API server (package
// rollout/sandbox/kube). The policy is the in-process vLLM simulator playing a
// scripted student (a test and demo backend, not a language model): half the
// rollouts fix the bug, half break it another way.
//
//	go run ./examples/k8s-sandbox -kubeconfig ~/.kube/config -namespace sandboxes \
//		-helper-image REGISTRY/agenticopd-pod:dev -image REGISTRY/swe-toy:1
//
// The two images must be pullable by the cluster (or on its nodes, with
// -pull-policy Never): the helper's, which agenticopd-pod writes
// (`agenticopd-pod image -o pod.tar -tag NAME`), and the toy repository's. README.md
// says how to run it against the repository's test cluster in one command.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/images/imagestest"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func main() { cli.Main("k8s-sandbox", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("k8s-sandbox", "runs one group of the toy repository task with every sandbox a Kubernetes pod of the task's image, reached only by exec through the API server", stdout)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), cli.Usage("kubeconfig", "default: $KUBECONFIG"))
	namespace := fs.String("namespace", "default", cli.Usage("namespace"))
	helperImage := fs.String("helper-image", "", cli.Usage("helper-image", "required"))
	image := fs.String("image", "", cli.Usage("image", "required: the toy repository's"))
	pullPolicy := fs.String("pull-policy", string(corev1.PullIfNotPresent), cli.Usage("pull-policy"))
	taskFile := fs.String("tasks", filepath.Join("testdata", "swe", "tasks.jsonl"), cli.Usage("tasks", "the toy repository's SWE-bench rows"))
	groupSize := fs.Int("group-size", 2, cli.Usage("group-size"))
	trustPolicy := fs.Bool("trust-network-policy", false, cli.Usage("trust-network-policy"))
	cpu := fs.String("cpu", "250m", cli.Usage("cpu"))
	memory := fs.String("memory", "512Mi", cli.Usage("memory"))
	out := fs.String("out", "", cli.Usage("out", "groups.jsonl, the group as an Atropos JSON line; default: none written"))
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case *kubeconfig == "":
		return &cli.FlagError{Flag: "kubeconfig", Value: `""`, Reason: "a kubeconfig file (or set KUBECONFIG)"}
	case *helperImage == "":
		return &cli.FlagError{Flag: "helper-image", Value: `""`, Reason: "an image reference (and -image too)"}
	case *image == "":
		return &cli.FlagError{Flag: "image", Value: `""`, Reason: "the toy repository's image reference"}
	}
	if err := cli.AtLeast("group-size", *groupSize, 1); err != nil {
		return err
	}
	rest, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", *kubeconfig, err)
	}
	ts, err := (&cli.TaskFlags{Spec: *taskFile}).Load(ctx, nil)
	if err != nil {
		return err
	}
	if len(ts) == 0 || ts[0].Repo == nil {
		return &cli.FlagError{Flag: "tasks", Value: *taskFile, Reason: "repository tasks (the toy repository's rows)"}
	}
	task := ts[0]
	task.Repo.Image = *image

	f, err := kube.New(ctx, kube.Config{
		REST: rest, Namespace: *namespace, HelperImage: *helperImage,
		ImagePullPolicy: corev1.PullPolicy(*pullPolicy), TrustNetworkPolicy: *trustPolicy,
		Limits: kube.Limits{CPU: *cpu, Memory: *memory},
	})
	if err != nil {
		return err
	}
	defer f.Close()
	enf := f.Enforcement()
	fmt.Fprintf(stdout, "kube: namespace %s, Lease %s; a sandbox without network: %s (%s)\n", *namespace, f.Lease(), enf.Network, enf.NetworkDetail)

	sim, err := vllmtest.Start(vllmtest.WithAgentScript((&imagestest.ToyStudent{}).Turn),
		vllmtest.WithChatScript(scripted.Judge), vllmtest.WithMaxLogprobs(8))
	if err != nil {
		return err
	}
	defer sim.Close()
	fmt.Fprintln(stdout, scripted.Banner(sim, "the student, the judge and the teacher"))
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy: sim.Client(), SandboxFactory: f, GroupSize: *groupSize, DistillTopK: 8, KeepEqualScores: true,
	})
	if err != nil {
		return err
	}
	start := time.Now()
	g, err := env.CollectGroup(ctx, task)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "task %s: %d rollouts in pods of %s, %.1f s\n", task.ID, len(g.Rollouts), *image, time.Since(start).Seconds())
	for i, r := range g.Rollouts {
		v := r.Verification
		fmt.Fprintf(stdout, "  rollout %d: %s, correctness %.1f, score %.3f\n", i, v.Rule, v.Correctness, r.Reward.Reward)
	}
	if *out == "" {
		return nil
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	w, err := os.Create(filepath.Join(*out, "groups.jsonl"))
	if err != nil {
		return err
	}
	if err := atropos.WriteJSONL(w, g.Data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

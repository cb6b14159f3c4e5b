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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube"
	"github.com/agentic-opd/agenticopd/tasks"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "k8s-sandbox:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("k8s-sandbox", flag.ContinueOnError)
	kubeconfig := fl.String("kubeconfig", os.Getenv("KUBECONFIG"), "the kubeconfig of the cluster (default $KUBECONFIG)")
	namespace := fl.String("namespace", "default", "the namespace of the sandbox pods (the factory needs the Role rollout/sandbox/kube documents there)")
	helperImage := fl.String("helper-image", "", "the in-pod helper's image (required; agenticopd-pod image writes it)")
	image := fl.String("image", "", "the toy repository's image, in place of the one the task names (required)")
	pullPolicy := fl.String("pull-policy", string(corev1.PullIfNotPresent), "the pods' imagePullPolicy: Always, IfNotPresent or Never")
	taskFile := fl.String("tasks", filepath.Join("testdata", "swe", "tasks.jsonl"), "the SWE-bench rows of the toy repository")
	groupSize := fl.Int("group-size", 2, "rollouts in the group")
	trustPolicy := fl.Bool("trust-network-policy", false, "the cluster's network plugin enforces NetworkPolicy (else a sandbox without network needs pods that have only a loopback interface)")
	cpu := fl.String("cpu", "250m", "each pod's cpu limit and request (a group holds 2×group-size pods at once: its rollouts and their gradings)")
	memory := fl.String("memory", "512Mi", "each pod's memory limit and request")
	out := fl.String("o", "", "also write the group as an Atropos JSON line to this file")
	if err := fl.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	switch {
	case *kubeconfig == "":
		return fmt.Errorf("%w: -kubeconfig (or KUBECONFIG) names no file", errUsage)
	case *helperImage == "" || *image == "":
		return fmt.Errorf("%w: -helper-image and -image are required", errUsage)
	case *groupSize < 1:
		return fmt.Errorf("%w: -group-size must be at least 1", errUsage)
	}
	rest, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", *kubeconfig, err)
	}
	ts, err := tasks.LoadSWE(*taskFile, tasks.SWEConfig{})
	if err != nil {
		return err
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

	sim, err := vllmtest.Start(vllmtest.WithAgentScript((&scripted.ToyRepoStudent{}).Turn),
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
	w, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := atropos.WriteJSONL(w, g.Data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// Command serve runs the online loop: an env process that registers with the Atropos
// trajectory API, keeps as many groups in flight as the API's back-pressure allows,
// and sends every group through a durable spool.
//
// With no flags it runs offline: the in-process vLLM simulator (vllmtest, a scripted
// test and demo backend, not a language model) plays the policy, judge and teacher,
// the in-process fake trajectory API (atropostest) plays run-api, and a small trainer
// loop in this process registers and pulls batches until -steps are done. With
// -api-url it joins a real trajectory API instead (and a real trainer must register
// there); with -vllm-url it talks to a real vLLM server.
//
//	go run ./examples/serve -steps 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/agentic-opd/agenticopd"
	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/atropos/atropostest"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/examples/internal/scripted"
	"github.com/agentic-opd/agenticopd/vllm"
)

func main() { cli.Main("serve", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stdout)
	apiURL := fs.String("api-url", "", "Atropos trajectory API (default: an in-process fake with an in-process trainer)")
	vllmURL := fs.String("vllm-url", "", "vLLM server of the policy (default: the in-process simulator)")
	model := fs.String("model", "", "served model name (default: the server's first model)")
	spool := fs.String("spool", "", "spool directory (default: a temporary directory)")
	groupSize := fs.Int("group-size", 4, "rollouts per group (a power of two)")
	batchSize := fs.Int("batch-size", 8, "the in-process trainer's batch size, in sequences")
	steps := fs.Int("steps", 2, "the in-process trainer's number of steps")
	topK := fs.Int("topk", 20, "teacher top-K per scored token")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := errors.Join(cli.AtLeast("group-size", *groupSize, 1), cli.AtLeast("batch-size", *batchSize, *groupSize),
		cli.AtLeast("steps", *steps, 1), cli.AtLeast("topk", *topK, 1)); err != nil {
		return err
	}

	policyURL := *vllmURL
	if policyURL == "" {
		sim, err := scripted.Start(*topK)
		if err != nil {
			return err
		}
		defer sim.Close()
		policyURL = sim.URL
		fmt.Fprintln(stdout, scripted.Banner(sim, "the policy, the judge and the teacher"))
	}
	var opts []vllm.Option
	if *model != "" {
		opts = append(opts, vllm.WithModel(*model))
	}
	policy, err := vllm.NewClient(policyURL, opts...)
	if err != nil {
		return err
	}

	trainerDone := make(chan error, 1)
	inProcess := *apiURL == ""
	if inProcess {
		api, err := atropostest.Start()
		if err != nil {
			return err
		}
		defer api.Close()
		*apiURL = api.URL()
		fmt.Fprintf(stdout, "FAKE API: atropostest at %s, with an in-process trainer (%d steps of %d sequences)\n", api.URL(), *steps, *batchSize)
		// The trainer goroutine ends before run returns: cancelled, then waited for.
		tctx, cancel := context.WithCancel(ctx)
		var trainer sync.WaitGroup
		trainer.Go(func() { trainerDone <- train(tctx, api.URL(), *batchSize, *steps, stdout) })
		defer trainer.Wait()
		defer cancel()
	}
	if *spool == "" {
		dir, err := os.MkdirTemp("", "agenticopd-spool-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*spool = dir
	}

	client, err := atropos.NewClient(*apiURL, atropos.ClientConfig{
		EnvName: "agentic_opd", GroupSize: *groupSize, SpoolDir: *spool,
	})
	if err != nil {
		return err
	}
	env, err := agenticopd.NewEnv(agenticopd.Config{
		Policy: policy, GroupSize: *groupSize, DistillTopK: *topK,
		OnGroup: func(g *agenticopd.Group) {
			status := "sent"
			if g.Dropped != "" {
				status = "dropped: " + g.Dropped
			}
			fmt.Fprintf(stdout, "env: group for %s, scores %.3f, %d hints, %s\n", g.Task.ID, g.Data.Scores, int(g.Metrics["opd/total_hints"]), status)
		},
	})
	if err != nil {
		return err
	}
	if err := env.Serve(ctx, client); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "env: the trainer has every step it asked for; %g groups sent\n", env.Metrics()["env/groups_sent"])
	if !inProcess {
		return nil
	}
	// The stop rule counts queued batches as done, so the trainer may still be pulling.
	select {
	case err := <-trainerDone:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// train is a stand-in trainer: it registers, then pulls batches until it has taken
// steps of them.
func train(ctx context.Context, url string, batchSize, steps int, stdout io.Writer) error {
	tr, err := atropos.NewTrainer(url)
	if err != nil {
		return err
	}
	if _, err := tr.Register(ctx, atropos.TrainerRegistration{BatchSize: batchSize, MaxTokenLen: 32768, NumSteps: steps}); err != nil {
		return err
	}
	for done := 0; done < steps; {
		batch, err := tr.Batch(ctx)
		if err != nil {
			return err
		}
		if batch == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		done++
		rows := 0
		for _, g := range batch {
			for s := range g.Tokens {
				for p := range g.Tokens[s] {
					if ids, _ := g.DistillRow(s, p); len(ids) > 0 {
						rows++
					}
				}
			}
		}
		fmt.Fprintf(stdout, "trainer: step %d: %d sequences, %d positions with teacher rows\n", done, atropos.Sequences(batch...), rows)
	}
	return nil
}

// Command inspect renders a JSON Lines file of Atropos groups (the output of the
// quickstart, of Env.Process, or of any env) as one self-contained HTML page: the
// inspector of package report.
//
// Token text comes from the detokenizer of the server that served the model (-vllm-url),
// or, for groups the simulator produced (the quickstart's offline run), from the
// simulator's (-simulator). With neither the page shows token ids.
//
// Every figure of the page comes from the file, by the same code as the page a run
// writes from memory (report.Sequence.Figures). What the file does not carry is not
// made up: JSON Lines of groups hold no hints, so the hints column says "–"
// (unknown), and the score's breakdown and the rollouts' turns are not shown.
//
//	go run ./examples/inspect -in opd-out/groups.jsonl -html report.html -simulator
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agentic-opd/agenticopd/atropos"
	"github.com/agentic-opd/agenticopd/examples/internal/cli"
	"github.com/agentic-opd/agenticopd/report"
	"github.com/agentic-opd/agenticopd/vllm"
	"github.com/agentic-opd/agenticopd/vllm/vllmtest"
)

func main() { cli.Main("inspect", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := cli.NewFlagSet("inspect", "renders a JSON Lines file of Atropos groups as one self-contained HTML page, the inspector of package report", stdout)
	in := fs.String("in", "", cli.Usage("in", "required"))
	out := fs.String("html", "report.html", cli.Usage("html"))
	vllmURL := fs.String("vllm-url", "", cli.Usage("vllm-url", "its /detokenize gives the token text"))
	model := fs.String("model", "", cli.Usage("model"))
	simulator := fs.Bool("simulator", false, cli.Usage("simulator"))
	topK := fs.Int("show-topk", report.DefaultTopK, cli.Usage("show-topk"))
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case *in == "":
		return &cli.FlagError{Flag: "in", Value: `""`, Reason: "a JSON Lines file of groups"}
	case *vllmURL != "" && *simulator:
		return &cli.FlagError{Flag: "simulator", Value: true, Reason: "false with -vllm-url (one detokenizer)"}
	}
	if err := errors.Join(cli.AtLeast("show-topk", *topK, 1), cli.URL("vllm-url", *vllmURL)); err != nil {
		return err
	}

	opts := report.Options{Title: "agenticopd report: " + *in, TopK: *topK}
	switch {
	case *vllmURL != "":
		var vopts []vllm.Option
		if *model != "" {
			vopts = append(vopts, vllm.WithModel(*model))
		}
		c, err := vllm.NewClient(*vllmURL, vopts...)
		if err != nil {
			return err
		}
		opts.Detokenizer = c
	case *simulator:
		sim, err := vllmtest.Start()
		if err != nil {
			return err
		}
		defer sim.Close()
		fmt.Fprintf(stdout, "SIMULATOR: token text from vllmtest's vocabulary at %s (right only for groups the simulator produced)\n", sim.URL)
		opts.Detokenizer = sim.Client()
	default:
		fmt.Fprintln(stdout, "no -vllm-url or -simulator: the page shows token ids, not text")
	}

	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	// The page is written next to -html and renamed to it only when complete.
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".inspect-*.html")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	defer tmp.Close()
	rw, err := report.NewWriter(tmp, opts)
	if err != nil {
		return err
	}
	n := 0
	err = atropos.ReadJSONL(f, func(g *atropos.ScoredDataGroup) error {
		n++
		return rw.Add(ctx, report.FromScoredData("group "+strconv.Itoa(n), g))
	})
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if n == 0 {
		return errors.New(*in + ": no groups")
	}
	if err := rw.Close(); err != nil {
		return err
	}
	size, err := tmp.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if err := errors.Join(tmp.Chmod(0o644), tmp.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d groups to %s (%.1f MB)\n", n, *out, float64(size)/1e6)
	return nil
}

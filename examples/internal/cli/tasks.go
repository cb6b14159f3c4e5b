package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentic-opd/agenticopd/images"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
	"github.com/agentic-opd/agenticopd/tasks"
)

// TasksUsage is the meaning of every program's -tasks flag.
const TasksUsage = "task source: builtin, FILE.jsonl, FILE.json, FILE.parquet, hf:DATASET_ID[@SPLIT], or a Harbor task directory " +
	"(DIR or harbor:DIR); task text and tests, or repository tasks (SWE-bench, SWE-Gym, SWE-smith, SWE-rebench, Harbor), " +
	"told apart by their columns (see -tasks-format); hf: reads $" + HFTokenEnv + " for private or gated datasets"

// TaskFlags are the flags of a program that reads tasks, as [AddTaskFlags] defines
// them.
type TaskFlags struct {
	Spec       string // -tasks
	Format     string // -tasks-format: "auto", or a tasks.Format
	Specs      string // -specs: a JSON file for SWEConfig.Specs
	Image      string // -image: every repository task's image instead of its own
	ImageCache string // -image-cache: where repository tasks' images are unpacked
	HFCache    string // -hf-cache
	HFToken    string // -hf-token ($HF_TOKEN when empty)
}

// AddTaskFlags defines -tasks (default def), -tasks-format, -specs, -image,
// -image-cache, -hf-cache and -hf-token on fs.
func AddTaskFlags(fs *flag.FlagSet, def string) *TaskFlags {
	f := &TaskFlags{}
	fs.StringVar(&f.Spec, "tasks", def, Usage("tasks"))
	fs.StringVar(&f.Format, "tasks-format", "auto", Usage("tasks-format"))
	fs.StringVar(&f.Specs, "specs", "", Usage("specs"))
	fs.StringVar(&f.Image, "image", "", Usage("image", "a local mirror, or a test image"))
	fs.StringVar(&f.ImageCache, "image-cache", images.DefaultDir, Usage("image-cache"))
	fs.StringVar(&f.HFCache, "hf-cache", "", Usage("hf-cache"))
	fs.StringVar(&f.HFToken, "hf-token", "", Usage("hf-token"))
	return f
}

// Load loads the tasks -tasks names: nil for "builtin". The format is -tasks-format's,
// or, for "auto", the one [tasks.DetectFormat] finds (for hf: in the first file of
// the split, once it is in the cache). An empty source, one without any task that
// has tests, a malformed one, or one whose format cannot be told is an error that
// names the -tasks value; log (if not nil) gets one line of what was read. -image, when
// set, replaces every repository task's image.
func (f *TaskFlags) Load(ctx context.Context, log *slog.Logger) ([]tasks.Task, error) {
	format, err := f.format()
	if err != nil {
		return nil, err
	}
	if f.Spec == "builtin" {
		return nil, nil
	}
	cfg := tasks.SWEConfig{}
	if f.Specs != "" {
		if cfg.Specs, err = tasks.LoadRepoSpecs(f.Specs); err != nil {
			return nil, fmt.Errorf("-specs %s: %w", f.Specs, err)
		}
	}
	var (
		ts   []tasks.Task
		rows int
	)
	switch {
	case strings.HasPrefix(f.Spec, "hf:"):
		ts, rows, format, err = f.loadHub(ctx, format, cfg, log)
	default:
		path := strings.TrimPrefix(f.Spec, "harbor:")
		if strings.HasPrefix(f.Spec, "harbor:") {
			format = tasks.FormatHarbor
		}
		st, serr := os.Stat(path)
		if (serr != nil || !st.IsDir()) && !slices.Contains([]string{".jsonl", ".json", ".parquet"}, strings.ToLower(filepath.Ext(path))) {
			return nil, &FlagError{Flag: "tasks", Value: f.Spec, Reason: "builtin, FILE.jsonl, FILE.json, FILE.parquet, hf:DATASET_ID[@SPLIT] or a Harbor task directory"}
		}
		if format == "" {
			if format, err = tasks.DetectFormat(path); errors.Is(err, tasks.ErrUnknownFormat) {
				err = fmt.Errorf("%w; or give -tasks-format", err)
			}
		}
		if err == nil {
			ts, rows, err = loadFile(path, format, cfg)
		}
	}
	if errors.Is(err, tasks.ErrUnknownRepo) {
		return nil, fmt.Errorf("-tasks %s: %w (from the command line: a -specs file)", f.Spec, err)
	}
	if err != nil {
		return nil, fmt.Errorf("-tasks %s: %w", f.Spec, err)
	}
	if f.Image != "" {
		for i := range ts {
			if ts[i].Repo != nil {
				r := *ts[i].Repo
				r.Image = f.Image
				ts[i].Repo = &r
			}
		}
	}
	if log != nil {
		log.Info("tasks loaded", "source", f.Spec, "tasks", len(ts), "format", string(format), "rows", rows,
			"repository_tasks", countRepo(ts))
	}
	return ts, nil
}

// format is -tasks-format as a tasks.Format, "" for auto.
func (f *TaskFlags) format() (tasks.Format, error) {
	if f.Format == "" || f.Format == "auto" {
		return "", nil
	}
	format, err := tasks.ParseFormat(f.Format)
	if err != nil {
		return "", &FlagError{Flag: "tasks-format", Value: f.Format, Reason: "auto, prompt, swe or harbor"}
	}
	return format, nil
}

// loadFile reads the file or directory path in format.
func loadFile(path string, format tasks.Format, cfg tasks.SWEConfig) ([]tasks.Task, int, error) {
	switch format {
	case tasks.FormatSWE:
		ts, err := tasks.LoadSWE(path, cfg)
		return ts, len(ts), err
	case tasks.FormatHarbor:
		ts, err := tasks.LoadHarborDir(path, cfg)
		return ts, len(ts), err
	}
	load := tasks.LoadJSONL
	if strings.EqualFold(filepath.Ext(path), ".parquet") {
		load = tasks.LoadParquet
	}
	ts, report, err := load(path, tasks.LoadConfig{})
	return ts, report.Rows, err
}

// loadHub reads a split of a Hub dataset, "hf:DATASET_ID[@SPLIT]".
func (f *TaskFlags) loadHub(ctx context.Context, format tasks.Format, cfg tasks.SWEConfig, log *slog.Logger) ([]tasks.Task, int, tasks.Format, error) {
	cache := f.HFCache
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return nil, 0, "", &FlagError{Flag: "hf-cache", Value: `""`, Reason: "set: " + err.Error()}
		}
		cache = filepath.Join(dir, "agenticopd", "hf")
	}
	id, split, _ := strings.Cut(strings.TrimPrefix(f.Spec, "hf:"), "@")
	hub := tasks.HubConfig{Dataset: id, Split: split, CacheDir: cache, Token: HFToken(f.HFToken), Logger: log}
	if format == tasks.FormatHarbor {
		return nil, 0, "", &FlagError{Flag: "tasks-format", Value: f.Format, Reason: "prompt or swe for an hf: dataset (Harbor tasks are directories)"}
	}
	if format == "" {
		paths, err := tasks.FetchHub(ctx, hub) // cached: the loaders below read the same files
		if err != nil {
			return nil, 0, "", err
		}
		if len(paths) == 0 {
			return nil, 0, "", fmt.Errorf("%w: the split has no Parquet file", tasks.ErrNoTasks)
		}
		if format, err = tasks.DetectFormat(paths[0]); err != nil {
			if errors.Is(err, tasks.ErrUnknownFormat) {
				err = fmt.Errorf("%w; or give -tasks-format", err)
			}
			return nil, 0, "", err
		}
	}
	if format == tasks.FormatSWE {
		ts, err := tasks.LoadSWEHub(ctx, hub, cfg)
		return ts, len(ts), format, err
	}
	ts, report, err := tasks.LoadHub(ctx, hub)
	return ts, report.Rows, format, err
}

func countRepo(ts []tasks.Task) int {
	n := 0
	for _, t := range ts {
		if t.Repo != nil {
			n++
		}
	}
	return n
}

// HasRepo reports whether ts holds a repository task (one whose sandboxes are made
// from its image).
func HasRepo(ts []tasks.Task) bool { return countRepo(ts) > 0 }

// ImageSandbox returns the bubblewrap factory for a dataset with repository tasks:
// their images are pulled (the default keychain's credentials) and unpacked into the
// image cache at dir. Image sandboxes never run unconfined: without a working
// bubblewrap, or where image sandboxes cannot be made, the error wraps [ErrSetup]
// (exit status 2) and says so and what to do.
func ImageSandbox(ctx context.Context, dir string, log *slog.Logger) (*bwrap.Factory, error) {
	cache, err := images.NewCache(images.CacheConfig{Dir: dir, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("-image-cache %s: %w", dir, err)
	}
	if _, err := os.Stat(Python); err != nil {
		return nil, fmt.Errorf("python3 not found (%s): the tests run with it; install it: %s", Python, Install("python3"))
	}
	f, err := bwrap.New(ctx, bwrap.Config{BwrapPath: BwrapPath, Python: Python, Images: cache, Logger: log})
	if err != nil {
		if errors.Is(err, bwrap.ErrBwrapNotFound) {
			return nil, fmt.Errorf("%w: repository tasks run only in bubblewrap sandboxes of their images: %w (install it: %s)", ErrSetup, err, Install("bubblewrap"))
		}
		return nil, fmt.Errorf("%w: repository tasks run only in bubblewrap sandboxes of their images: %w", ErrSetup, err)
	}
	return f, nil
}

package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrHarborUnsupported is wrapped by [LoadHarbor]'s error for a task directory this
// library cannot run: one without a prebuilt image (building a Dockerfile is out of
// scope), or one whose verifier is not a SWE-style test run it can grade.
var ErrHarborUnsupported = errors.New("tasks: Harbor task not supported")

// LoadHarbor reads a Harbor (terminal-bench 2) task directory: instruction.md (the
// prompt), task.toml (its [environment] docker_image, allow_internet and [verifier]
// timeout_sec are read) and tests/. The library runs prebuilt images only:
// task.toml must name [environment] docker_image; a task with only
// environment/Dockerfile is refused (building images is out of scope: build and push
// it, then set docker_image). Grading is this library's, by FAIL_TO_PASS and
// PASS_TO_PASS, so the task must carry SWE-style instance data: tests/config.json
// (a SWE-bench row, as Harbor's SWE-bench adapter exports it), read by
// [SWERow.Task] with cfg. A verifier that only writes a reward file from its own
// logic is refused, since its tests run in the agent's reach (see the package doc).
// task.toml is read as a TOML subset: [sections], key = "string", number or boolean.
func LoadHarbor(dir string, cfg SWEConfig) (Task, error) {
	fail := func(format string, a ...any) (Task, error) {
		return Task{}, fmt.Errorf("tasks: Harbor task %s: "+format, append([]any{dir}, a...)...)
	}
	instr, err := os.ReadFile(filepath.Join(dir, "instruction.md"))
	if err != nil {
		return fail("%w", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "task.toml"))
	if err != nil {
		return fail("%w", err)
	}
	conf, err := parseTOMLSubset(string(raw))
	if err != nil {
		return fail("task.toml: %w", err)
	}
	image, _ := conf["environment.docker_image"].(string)
	if image == "" {
		return fail("%w: task.toml has no [environment] docker_image; building environment/Dockerfile is out of "+
			"scope: build and push the image, then set docker_image", ErrHarborUnsupported)
	}
	data, err := os.ReadFile(filepath.Join(dir, "tests", "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return fail("%w: no tests/config.json with SWE-style instance data (FAIL_TO_PASS, PASS_TO_PASS, "+
			"test_patch); this library grades by those lists, not by a verifier's reward file", ErrHarborUnsupported)
	}
	if err != nil {
		return fail("%w", err)
	}
	var row SWERow
	if err := json.Unmarshal(data, &row); err != nil {
		return fail("tests/config.json: %v", jsonReason(err))
	}
	row.Image, row.ImageName, row.DockerImage = image, "", ""
	if strings.TrimSpace(string(instr)) != "" {
		row.ProblemStatement = string(instr)
	}
	if row.InstanceID == "" {
		row.InstanceID = filepath.Base(dir)
	}
	t, err := row.Task(cfg)
	if err != nil {
		return fail("%w", err)
	}
	if v, ok := conf["environment.allow_internet"].(bool); ok {
		t.Repo.Network = v
	}
	if v, ok := conf["verifier.timeout_sec"].(float64); ok && v > 0 && cfg.TestTimeout == 0 {
		t.Repo.TestTimeout = time.Duration(v * float64(time.Second))
	}
	return t, nil
}

// parseTOMLSubset reads "[section]" headers and "key = value" lines (string, number,
// boolean) into "section.key" entries; arrays and inline tables are skipped.
func parseTOMLSubset(s string) (map[string]any, error) {
	out := map[string]any{}
	section := ""
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			section = strings.Trim(line, "[] ")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue // a continued array or table
		}
		key := strings.Trim(strings.TrimSpace(k), `"`)
		if section != "" {
			key = section + "." + key
		}
		v = strings.TrimSpace(v)
		switch {
		case strings.HasPrefix(v, `"`):
			end := strings.LastIndex(v, `"`)
			if end == 0 {
				return nil, fmt.Errorf("line %d: unterminated string", i+1)
			}
			str, err := strconv.Unquote(v[:end+1])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			out[key] = str
		case strings.HasPrefix(v, "'"):
			out[key] = strings.Trim(v[:strings.LastIndex(v, "'")+1], "'")
		case v == "true", v == "false":
			out[key] = v == "true"
		default:
			if j := strings.IndexByte(v, '#'); j >= 0 {
				v = strings.TrimSpace(v[:j])
			}
			if f, err := strconv.ParseFloat(strings.ReplaceAll(v, "_", ""), 64); err == nil {
				out[key] = f
			}
		}
	}
	return out, nil
}

package printcheck_test

import (
	"testing"

	"github.com/agentic-opd/agenticopd/internal/printcheck"
)

func TestRepeatedPrefix(t *testing.T) {
	for s, want := range map[string]string{
		"validate-tasks: validate-tasks: some tasks failed validation": "validate-tasks",
		"reward: sandbox: sandbox: image x: not found":                 "sandbox",
		"rollout 3 of task x: task x: no factory":                      "task x",
		"quickstart: agenticopd: process: 0 of 2 groups written":       "",
		"line one\nserve: agenticopd: rollout failed: policy: refused": "",
		"score 0.5: correctness 1: efficiency 0.25":                    "",
		"a: b\nc: d: d": "d",
		"reward: grading sandbox: sandbox: new: mkdir":                     "",
		"group 1: task t: rollout 0 of task t: agenticopd: rollout failed": "",
	} {
		if got := printcheck.RepeatedPrefix(s); got != want {
			t.Errorf("RepeatedPrefix(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestFloatNoise(t *testing.T) {
	for s, want := range map[string]string{
		"train/mean_reward 0.8262499999999998": "0.8262499999999998",
		"x 0.30000000000000004 y":              "0.30000000000000004",
		"train/mean_reward 0.82625":            "",
		"score 1.000 (C 0.1 E 0.0)":            "",
		"tokens 1000000 at 10.5":               "",
		"a 0.000001":                           "",
	} {
		if got := printcheck.FloatNoise(s); got != want {
			t.Errorf("FloatNoise(%q) = %q, want %q", s, got, want)
		}
	}
}

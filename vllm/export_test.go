package vllm

import (
	"fmt"

	"github.com/agentic-opd/agenticopd/internal/jsonscan"
)

// ParseTokenIDString is parseTokenIDString, for the external tests.
var ParseTokenIDString = parseTokenIDString

// DecodePromptLogprobsGeneral is DecodePromptLogprobs with every position and entry
// read by the general path, never the fast one, for the external tests.
func DecodePromptLogprobsGeneral(data []byte) (*PromptLogprobs, error) {
	s := &jsonscan.Scanner{Data: data}
	p := &PromptLogprobs{}
	if err := decodePositions(s, p, false); err != nil {
		return nil, fmt.Errorf("vllm: %w", err)
	}
	if err := s.End(); err != nil {
		return nil, fmt.Errorf("vllm: %w", err)
	}
	return p, nil
}

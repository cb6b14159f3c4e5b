package vllmtest

import (
	"bytes"
	"errors"
)

// WithFrozenTeacher makes the server a frozen-teacher simulator for on-policy
// distillation demos: its model reads on differently once a hint is in the prompt.
// Wherever trigger's text first occurs in a prompt (as decoded from its token ids,
// special tokens kept), every later position gets its distribution from another model,
// the one [WithModelSeed](shiftSeed) selects, as a teacher that took a hint in would
// disagree with the student after it. Positions up to and including the token that
// completes the trigger keep the server's own model, so a prompt without the trigger
// is scored and generated exactly as without this option.
//
// It applies to prompt_logprobs (each position by where it lies) and to generation and
// its logprobs (all shifted when the prompt holds the trigger). The shift is a
// simulator's: it follows the trigger, not the hint's meaning. Programs that use it
// say so wherever the server's output appears (the quickstart's banner does).
//
// An empty trigger, or a shiftSeed equal to the model's own seed, is an error from
// [Start].
func WithFrozenTeacher(trigger string, shiftSeed uint64) Option {
	return func(c *config) {
		c.frozen = &frozenTeacher{trigger: []byte(trigger), seed: shiftSeed}
	}
}

// frozenTeacher is the configuration of [WithFrozenTeacher].
type frozenTeacher struct {
	trigger []byte
	seed    uint64
}

// check reports a configuration that would shift nothing.
func (f *frozenTeacher) check(modelSeed uint64) error {
	switch {
	case f == nil:
		return nil
	case len(f.trigger) == 0:
		return errors.New("frozen teacher: the trigger text is empty")
	case f.seed == modelSeed:
		return errors.New("frozen teacher: the shifted model's seed equals the model's own (nothing would shift)")
	}
	return nil
}

// shiftAt returns the first position i of prompt whose distribution (of prompt[i],
// given prompt[:i]) comes from the shifted model: the position after the token that
// completes the first occurrence of the trigger. It returns -1 when the server has no
// frozen teacher or the prompt does not hold the trigger; len(prompt) when the trigger
// ends with the prompt (generation is shifted, no prompt position is).
func (s *Server) shiftAt(prompt []int32) int {
	if s.shifted == nil {
		return -1
	}
	n := 0
	for _, id := range prompt {
		if id >= 0 && int(id) < len(s.tok.pieces) {
			n += len(s.tok.pieces[id])
		}
	}
	text := make([]byte, 0, n)
	for _, id := range prompt {
		if id >= 0 && int(id) < len(s.tok.pieces) {
			text = append(text, s.tok.pieces[id]...)
		}
	}
	at := bytes.Index(text, s.cfg.frozen.trigger)
	if at < 0 {
		return -1
	}
	end := at + len(s.cfg.frozen.trigger)
	off := 0
	for i, id := range prompt {
		if id >= 0 && int(id) < len(s.tok.pieces) {
			off += len(s.tok.pieces[id])
		}
		if off >= end {
			return i + 1
		}
	}
	return len(prompt)
}

// modelAt returns the model of position i of a prompt whose shift starts at shift
// (from [Server.shiftAt]).
func (s *Server) modelAt(i, shift int) *model {
	if shift >= 0 && i >= shift {
		return s.shifted
	}
	return s.lm
}

// genModel returns the model that generates after prompt (and scores what it
// generated).
func (s *Server) genModel(prompt []int32) *model {
	return s.modelAt(len(prompt), s.shiftAt(prompt))
}

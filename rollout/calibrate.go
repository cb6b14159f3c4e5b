package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentic-opd/agenticopd/chat"
)

// done returns the calibration if it has succeeded.
func (t *Template) done() *Calibration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cal
}

// calibrated returns the cached calibration, running it once if needed. No lock is held
// during I/O: the first caller calibrates, the others wait for it or for their ctx.
func (t *Template) calibrated(ctx context.Context) (*Calibration, error) {
	for {
		t.mu.Lock()
		switch {
		case t.cal != nil:
			c := t.cal
			t.mu.Unlock()
			return c, nil
		case t.permErr != nil:
			err := t.permErr
			t.mu.Unlock()
			return nil, err
		case t.inflight == nil:
			ch := make(chan struct{})
			t.inflight = ch
			t.mu.Unlock()
			c, err := t.calibrate(ctx)
			t.mu.Lock()
			if err == nil {
				t.cal = c
			} else if errors.Is(err, ErrCalibration) {
				t.permErr = err
			}
			t.inflight = nil
			close(ch)
			t.mu.Unlock()
			return c, err
		}
		ch := t.inflight
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// calibrate runs the probes of §4.2.
func (t *Template) calibrate(ctx context.Context) (*Calibration, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrCalibration, fmt.Sprintf(format, args...))
	}
	base := t.cfg.Base
	rb, err := t.Render(ctx, base, false)
	if err != nil {
		return nil, fmt.Errorf("rollout: calibrating template: %w", err)
	}
	rg, err := t.Render(ctx, base, true)
	if err != nil {
		return nil, fmt.Errorf("rollout: calibrating template: %w", err)
	}
	c := &Calibration{Base: slices.Clone(rb.Tokens), BOS: -1, MaxModelLen: rb.MaxModelLen}
	if len(c.Base) == 0 {
		return nil, fail("the base conversation renders as no tokens")
	}
	if !hasPrefix(rg.Tokens, c.Base) || len(rg.Tokens) == len(c.Base) {
		return nil, fail("rendering with add_generation_prompt does not extend the rendering without it")
	}
	c.GenerationPrompt = slices.Clone(rg.Tokens[len(c.Base):])
	c.TurnStart = c.GenerationPrompt[0]
	if len(t.cfg.Tools) > 0 {
		// A server that ignores "tools" on /tokenize (vLLM before 0.9) would give the
		// model prompts without its tool definitions.
		rn, err := t.policy.Render(ctx, RenderRequest{Messages: base, ChatTemplateKwargs: t.cfg.ChatTemplateKwargs})
		if err != nil {
			return nil, fmt.Errorf("rollout: calibrating template: %w", err)
		}
		if slices.Equal(rn.Tokens, c.Base) {
			return nil, fail("the server renders the same tokens with and without tools: it ignores \"tools\" on /tokenize (vLLM 0.9 or later is needed)")
		}
	}

	// B + [assistant "x", user "y"] and the same with user "z": the two deltas share
	// the close and the separator as a common tail (verl's cross-check), the user turn
	// starts at the last turn-start token, and the assistant turn before it must end
	// with the same close and separator. No user turn directly follows the base's:
	// some templates refuse or merge consecutive user messages.
	turns := func(user string) []chat.Message {
		return []chat.Message{{Role: chat.RoleAssistant, Content: "x"}, {Role: chat.RoleUser, Content: user}}
	}
	ay, err := t.rawDelta(ctx, c, turns("y"))
	if err != nil {
		return nil, err
	}
	az, err := t.rawDelta(ctx, c, turns("z"))
	if err != nil {
		return nil, err
	}
	if len(ay) == 0 || ay[0] != c.TurnStart {
		return nil, fail("an appended turn does not start with the generation prompt's first token %d", c.TurnStart)
	}
	tail := commonSuffix(ay, az)
	if len(tail) == 0 || tail[0] == c.TurnStart {
		return nil, fail("user turns have no common closing tail")
	}
	c.Close = tail[0]
	c.Separator = slices.Clone(tail[1:])
	if c.Base[0] != c.TurnStart {
		c.BOS = c.Base[0]
	}
	if k := lastIndex(ay, c.TurnStart); k <= 0 || !hasSuffix(ay[:k], tail) {
		return nil, fail("an assistant turn does not end with the close token %d and separator %v", c.Close, c.Separator)
	}

	// Tool runs: two results with newline-edged content; the turn count says whether
	// the template merges them. Tried on the fixed base, then after an assistant turn
	// calling the tools (templates that take tool messages only there).
	tools := []chat.Message{
		{Role: chat.RoleTool, ToolCallID: "call_0_0", Name: "probe", Content: "\nfirst result\n"},
		{Role: chat.RoleTool, ToolCallID: "call_0_1", Name: "probe", Content: "second result\n\n"},
	}
	var toolErrs []error
	for _, kind := range []BaseKind{BaseFixed, BaseToolCalls} {
		err := t.probeTools(ctx, c, kind, tools)
		if err == nil {
			c.ToolBase, toolErrs = kind, nil
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("rollout: calibrating template: %w", ctx.Err())
		}
		toolErrs = append(toolErrs, fmt.Errorf("on the %s base: %w", kind, err))
	}
	if toolErrs != nil {
		err := errors.Join(toolErrs...)
		for _, e := range toolErrs {
			if !errors.Is(e, ErrTemplateDrift) {
				return nil, fmt.Errorf("rollout: calibrating template: %w", err)
			}
		}
		return nil, fail("tool results are not prefix-stable: %v", err)
	}

	// User messages (hints): allowed when prefix-stable on the fixed base, or else on
	// the base without its user message (templates that refuse two user turns in a
	// row, or whose rendering of one depends on the other). A role that fits neither,
	// whether a check fails or the server refuses the render, is refused by Delta; the
	// agent does not need it.
	hint := []chat.Message{{Role: chat.RoleUser, Content: "\nA hint.\n"}}
	c.UserDelta, c.UserBase = true, BaseFixed
	_, ferr := t.deltaOn(ctx, c, BaseFixed, hint, false)
	if ferr != nil {
		c.UserDelta = false
		if ctx.Err() != nil {
			return nil, fmt.Errorf("rollout: calibrating template: %w", ctx.Err())
		}
		if len(base) >= 2 {
			if r, err := t.Render(ctx, base[:len(base)-1], false); err == nil && len(r.Tokens) > 0 {
				c.BaseWithoutUser = slices.Clone(r.Tokens)
				if _, err := t.deltaOn(ctx, c, BaseNoUser, hint, false); err == nil {
					c.UserDelta, c.UserBase = true, BaseNoUser
				}
			}
		}
		if !c.UserDelta {
			c.BaseWithoutUser = nil
			if ctx.Err() != nil {
				return nil, fmt.Errorf("rollout: calibrating template: %w", ctx.Err())
			}
		}
	}
	return c, nil
}

// probeTools checks that the tool-run probe renders on the base of the given kind as
// whole turns, prefix-stably, with and without the generation prompt; it sets
// c.MergesToolRuns.
func (t *Template) probeTools(ctx context.Context, c *Calibration, kind BaseKind, tools []chat.Message) error {
	base, baseIDs, err := t.base(ctx, c, kind, tools)
	if err != nil {
		return err
	}
	r, err := t.Render(ctx, append(base, tools...), false)
	if err != nil {
		return err
	}
	if !hasPrefix(r.Tokens, baseIDs) {
		return &DriftError{Check: "prefix", Detail: "rendering the base plus tool messages does not start with the base rendering"}
	}
	d := r.Tokens[len(baseIDs):]
	c.MergesToolRuns = true
	if checkShape(c, d, expectedTurns(c, tools), false, nil) != nil {
		c.MergesToolRuns = false
		if err := checkShape(c, d, expectedTurns(c, tools), false, nil); err != nil {
			return fmt.Errorf("tool results do not render as whole turns: %w", err)
		}
	}
	_, err = t.deltaOn(ctx, c, kind, tools, true)
	return err
}

// rawDelta renders base+msgs without the generation prompt and returns the suffix
// after the base, asserting the prefix.
func (t *Template) rawDelta(ctx context.Context, c *Calibration, msgs []chat.Message) ([]int32, error) {
	return t.rawRender(ctx, c, msgs, false)
}

func (t *Template) rawRender(ctx context.Context, c *Calibration, msgs []chat.Message, gen bool) ([]int32, error) {
	r, err := t.Render(ctx, append(chat.Clone(t.cfg.Base), msgs...), gen)
	if err != nil {
		return nil, fmt.Errorf("rollout: calibrating template: %w", err)
	}
	if !hasPrefix(r.Tokens, c.Base) {
		return nil, fmt.Errorf("%w: rendering the base plus %s messages does not start with the base rendering",
			ErrCalibration, msgs[0].Role)
	}
	return slices.Clone(r.Tokens[len(c.Base):]), nil
}

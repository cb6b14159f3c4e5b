package rollout_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentic-opd/agenticopd/chat"
	"github.com/agentic-opd/agenticopd/rollout"
)

// The fake policy's tokenizer: special tokens are matched whole, every other byte is
// one token (id 100+byte).
const (
	idImStart   int32 = 1
	idImEnd     int32 = 2
	idEndOfText int32 = 3
	idBOS       int32 = 4
	idHeader    int32 = 5 // Llama-3 style <|start_header_id|>
	idEndHeader int32 = 6
	idEOT       int32 = 7
)

var specials = []struct {
	lit string
	id  int32
}{
	{"<|im_start|>", idImStart}, {"<|im_end|>", idImEnd}, {"<|endoftext|>", idEndOfText},
	{"<|begin_of_text|>", idBOS}, {"<|start_header_id|>", idHeader},
	{"<|end_header_id|>", idEndHeader}, {"<|eot_id|>", idEOT},
}

func encode(s string) []int32 {
	var out []int32
outer:
	for len(s) > 0 {
		for _, sp := range specials {
			if strings.HasPrefix(s, sp.lit) {
				out = append(out, sp.id)
				s = s[len(sp.lit):]
				continue outer
			}
		}
		out = append(out, 100+int32(s[0]))
		s = s[1:]
	}
	return out
}

func decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 100 {
			b.WriteByte(byte(id - 100))
			continue
		}
		for _, sp := range specials {
			if sp.id == id {
				b.WriteString(sp.lit)
			}
		}
	}
	return b.String()
}

// templateStyle selects how the fake renders conversations.
type templateStyle int

const (
	styleChatML templateStyle = iota // Qwen-like: tool runs merged into one user turn
	styleLlama                       // BOS, header tokens, <|eot_id|>, no separator, one turn per tool message
)

// fakePolicy is a small in-process Policy with a real template and tokenizer and a
// scripted model.
type fakePolicy struct {
	style       templateStyle
	maxModelLen int
	// script returns the text of the next turn, given the prompt; finish "length" means
	// no close is appended. Nil answers "Done."
	script func(turn int, prompt string) (text, finish string)
	// renderHook may change what Render returns (drift injection).
	renderHook func(req rollout.RenderRequest, ids []int32) []int32
	// echoHook may change the echoed prompt.
	echoHook func(ids []int32) []int32
	// genErr, when set, is returned by Generate from turn genErrAt on.
	genErr   error
	genErrAt int
	// renderErrs fails the first renderErrs Render calls.
	renderErrs int
	// ignoreTools renders as an old server that does not know "tools".
	ignoreTools bool
	// toolsNeedCall refuses a tool message that does not follow an assistant tool call
	// or another tool message, as some templates do.
	toolsNeedCall bool
	// alternate refuses two user messages in a row, as some templates do.
	alternate bool

	mu       sync.Mutex
	renders  int
	prompts  [][]int32
	outputs  [][]int32
	lastReqs []rollout.GenerateRequest
}

func (p *fakePolicy) Render(ctx context.Context, req rollout.RenderRequest) (rollout.Rendered, error) {
	if err := ctx.Err(); err != nil {
		return rollout.Rendered{}, err
	}
	p.mu.Lock()
	p.renders++
	n := p.renders
	p.mu.Unlock()
	if n <= p.renderErrs {
		return rollout.Rendered{}, errors.New("fake: render unavailable")
	}
	text, err := p.renderText(req)
	if err != nil {
		return rollout.Rendered{}, err
	}
	ids := encode(text)
	if p.renderHook != nil {
		ids = p.renderHook(req, ids)
	}
	return rollout.Rendered{Tokens: ids, MaxModelLen: p.maxModelLen}, nil
}

func (p *fakePolicy) renderText(req rollout.RenderRequest) (string, error) {
	var b strings.Builder
	msgs := req.Messages
	if err := checkOrder(msgs, p.toolsNeedCall, p.alternate); err != nil {
		return "", err
	}
	toolsText := ""
	if len(req.Tools) > 0 && !p.ignoreTools {
		var names []string
		for _, t := range req.Tools {
			names = append(names, t.Function.Name)
		}
		toolsText = "\n# Tools: " + strings.Join(names, ",")
	}
	switch p.style {
	case styleChatML:
		for i, m := range msgs {
			switch m.Role {
			case chat.RoleSystem, chat.RoleUser:
				body := m.Content
				if i == 0 && m.Role == chat.RoleSystem {
					body += toolsText
				}
				fmt.Fprintf(&b, "<|im_start|>%s\n%s<|im_end|>\n", m.Role, body)
			case chat.RoleAssistant:
				b.WriteString("<|im_start|>assistant\n" + assistantBody(m) + "<|im_end|>\n")
			case chat.RoleTool:
				if i == 0 || msgs[i-1].Role != chat.RoleTool {
					b.WriteString("<|im_start|>user")
				}
				fmt.Fprintf(&b, "\n<tool_response>\n%s\n</tool_response>", m.Content)
				if i == len(msgs)-1 || msgs[i+1].Role != chat.RoleTool {
					b.WriteString("<|im_end|>\n")
				}
			default:
				return "", fmt.Errorf("fake: unknown role %q", m.Role)
			}
		}
		if req.AddGenerationPrompt {
			b.WriteString("<|im_start|>assistant\n")
		}
	case styleLlama:
		b.WriteString("<|begin_of_text|>")
		for i, m := range msgs {
			role, body := m.Role, m.Content
			if role == chat.RoleTool {
				role = "ipython"
			}
			if i == 0 && role == chat.RoleSystem {
				body += toolsText
			}
			if role == chat.RoleAssistant {
				body = assistantBody(m)
			}
			fmt.Fprintf(&b, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", role, body)
		}
		if req.AddGenerationPrompt {
			b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
		}
	}
	return b.String(), nil
}

// assistantBody renders content and tool calls the Qwen way.
func assistantBody(m chat.Message) string {
	var b strings.Builder
	b.WriteString(m.Content)
	for k, tc := range m.ToolCalls {
		if k > 0 || m.Content != "" {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "<tool_call>\n{\"name\": %q, \"arguments\": %s}\n</tool_call>", tc.Function.Name, tc.Function.Arguments)
	}
	return b.String()
}

func (p *fakePolicy) close() int32 {
	if p.style == styleLlama {
		return idEOT
	}
	return idImEnd
}

func (p *fakePolicy) Generate(ctx context.Context, req rollout.GenerateRequest) (rollout.Generation, error) {
	if err := ctx.Err(); err != nil {
		return rollout.Generation{}, err
	}
	p.mu.Lock()
	turn := len(p.prompts)
	p.prompts = append(p.prompts, slices.Clone(req.Prompt))
	p.lastReqs = append(p.lastReqs, req)
	p.mu.Unlock()
	if p.genErr != nil && turn >= p.genErrAt {
		return rollout.Generation{}, p.genErr
	}
	text, finish := "Done.", rollout.FinishStop
	if p.script != nil {
		text, finish = p.script(turn, decode(req.Prompt))
	}
	ids := encode(text)
	if finish == rollout.FinishStop && (len(ids) == 0 || ids[len(ids)-1] > 99) {
		ids = append(ids, p.close())
	}
	if len(ids) > req.MaxTokens {
		ids, finish = ids[:req.MaxTokens], rollout.FinishLength
	}
	lps := make([]float32, len(ids))
	for i := range lps {
		lps[i] = -0.125 * float32(i%5+1)
	}
	echo := slices.Clone(req.Prompt)
	if p.echoHook != nil {
		echo = p.echoHook(echo)
	}
	p.mu.Lock()
	p.outputs = append(p.outputs, slices.Clone(ids))
	p.mu.Unlock()
	return rollout.Generation{Tokens: ids, Logprobs: lps, Text: decode(ids), FinishReason: finish, PromptTokens: echo}, nil
}

// tempSandbox is a test Sandbox: a temporary directory, commands run by /bin/sh with
// the directory as cwd (no isolation), file tools through os.Root.
type tempSandbox struct {
	dir  string
	root *os.Root
	// stop ends every running command; Close calls it.
	stop context.CancelFunc
	life context.Context

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
}

func newTempSandbox(t *testing.T) *tempSandbox {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	life, stop := context.WithCancel(context.Background())
	sb := &tempSandbox{dir: dir, root: root, life: life, stop: stop}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

func (s *tempSandbox) Run(ctx context.Context, cmd rollout.Command) (rollout.CommandResult, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return rollout.CommandResult{}, errors.New("tempSandbox: closed")
	}
	s.running.Add(1)
	s.mu.Unlock()
	defer s.running.Done()
	timeout := cmd.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stopOnClose := context.AfterFunc(s.life, cancel)
	defer stopOnClose()
	argv := cmd.Argv
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", cmd.Shell}
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Dir = filepath.Join(s.dir, cmd.Dir)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	if cmd.Stdin != nil {
		c.Stdin = bytes.NewReader(cmd.Stdin)
	}
	start := time.Now()
	err := c.Run()
	res := rollout.CommandResult{Stdout: []byte(stdout.String()), Stderr: []byte(stderr.String()), Duration: time.Since(start), Unconfined: true}
	var exitErr *exec.ExitError
	switch {
	case s.life.Err() != nil:
		return res, errors.New("tempSandbox: closed while the command ran")
	case ctx.Err() == context.DeadlineExceeded:
		res.TimedOut, res.ExitCode = true, 124
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.ExitCode()
	case err != nil:
		return res, err
	}
	return res, nil
}

func (s *tempSandbox) ReadFile(name string) ([]byte, error) { return s.root.ReadFile(name) }

func (s *tempSandbox) WriteFile(name string, data []byte) error {
	if d := filepath.Dir(name); d != "." {
		if err := s.root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return s.root.WriteFile(name, data, 0o644)
}

func (s *tempSandbox) FS() fs.FS { return s.root.FS() }

func (s *tempSandbox) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.running.Wait()
	return s.root.Close()
}

// call is a Hermes tool-call block.
func call(name string, args any) string {
	a, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("<tool_call>\n{\"name\": %q, \"arguments\": %s}\n</tool_call>", name, a)
}

// checkOrder applies the message-order rules some templates raise on.
func checkOrder(msgs []chat.Message, toolsNeedCall, alternate bool) error {
	for i, m := range msgs {
		if i == 0 {
			continue
		}
		prev := msgs[i-1]
		if toolsNeedCall && m.Role == chat.RoleTool && prev.Role != chat.RoleTool &&
			(prev.Role != chat.RoleAssistant || len(prev.ToolCalls) == 0) {
			return fmt.Errorf("template error: messages[%d]: a tool message must follow an assistant tool call", i)
		}
		if alternate && m.Role == chat.RoleUser && prev.Role == chat.RoleUser {
			return fmt.Errorf("template error: messages[%d]: conversation roles must alternate", i)
		}
	}
	return nil
}

package rollouttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentic-opd/agenticopd/rollout"
)

// checkStart checks [rollout.Starter] when the sandbox implements it (it is optional):
// a conversation over stdin and stdout, end of file, the timeout, Kill, and the
// refusal of Command.Stdin.
func checkStart(ctx context.Context, sb rollout.Sandbox) error {
	st, ok := sb.(rollout.Starter)
	if !ok {
		return nil
	}
	if p, err := st.Start(ctx, rollout.Command{Shell: "cat", Stdin: []byte("x")}); err == nil {
		p.Kill()
		_, _ = p.Wait()
		return errors.New("Starter.Start accepted Command.Stdin; standard input is Process.Stdin")
	}
	p, err := st.Start(ctx, rollout.Command{Shell: "cat; echo err >&2"})
	if err != nil {
		return fmt.Errorf("start cat: %w", err)
	}
	r := bufio.NewReader(p.Stdout())
	for _, w := range []string{"ping\n", "pong\n"} {
		if _, err := io.WriteString(p.Stdin(), w); err != nil {
			p.Kill()
			_, _ = p.Wait()
			return fmt.Errorf("write %q: %w", w, err)
		}
		if got, err := r.ReadString('\n'); err != nil || got != w {
			p.Kill()
			_, _ = p.Wait()
			return fmt.Errorf("read back %q, %v; want %q", got, err, w)
		}
	}
	if err := p.Stdin().Close(); err != nil {
		return fmt.Errorf("close stdin: %w", err)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		return fmt.Errorf("stdout after end of input: %q, %v; want end of file", rest, err)
	}
	res, err := p.Wait()
	if err != nil || res.ExitCode != 0 || len(res.Stdout) != 0 || string(res.Stderr) != "err\n" {
		return fmt.Errorf("Process.Wait = %+v, %v; want exit 0, stdout streamed, stderr %q", res, err, "err\n")
	}

	p, err = st.Start(ctx, rollout.Command{Shell: "sleep 30", Timeout: 300 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("start sleep: %w", err)
	}
	if res, err := p.Wait(); err != nil || !res.TimedOut || res.ExitCode != 124 {
		return fmt.Errorf("timeout: Wait = %+v, %v; want TimedOut and exit code 124", res, err)
	}

	p, err = st.Start(ctx, rollout.Command{Shell: "echo started; sleep 30"})
	if err != nil {
		return fmt.Errorf("start sleep: %w", err)
	}
	if _, err := bufio.NewReader(p.Stdout()).ReadString('\n'); err != nil {
		p.Kill()
		_, _ = p.Wait()
		return fmt.Errorf("read: %w", err)
	}
	start := time.Now()
	p.Kill()
	p.Kill()
	if res, err := p.Wait(); err != nil || res.ExitCode == 0 || res.TimedOut {
		return fmt.Errorf("Process.Kill: Process.Wait = %+v, %v; want a non-zero exit code, not a timeout", res, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		return fmt.Errorf("Process.Wait returned %v after Process.Kill", d)
	}
	return nil
}

package podproto_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/kube/podproto"
)

// FuzzFrames feeds whatever a broken or hostile server could send to both decoders:
// the FrameReader (the helper's side) and the client's frame sink (through Run,
// ReadFile and SearchFiles). Neither panics; a stream without a well-formed
// result is ErrNoResult; a header announcing more than MaxFrame is refused before
// anything is allocated for it.
func FuzzFrames(f *testing.F) {
	var ok bytes.Buffer
	_ = podproto.WriteFrame(&ok, podproto.FrameStdout, []byte("out"))
	_ = podproto.WriteFrame(&ok, podproto.FrameResult, []byte(`{"exit_code":3}`))
	f.Add(ok.Bytes())
	f.Add([]byte{podproto.FrameResult, 0, 0, 0, 2, '{', '}'})
	f.Add([]byte{podproto.FrameStdout, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{podproto.FrameData, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := podproto.NewFrameReader(bytes.NewReader(data), podproto.HelperKinds)
		for {
			_, p, err := fr.Next()
			if err != nil {
				break
			}
			if len(p) > podproto.MaxFrame {
				t.Fatalf("a payload of %d bytes", len(p))
			}
		}
		fake := podproto.ExecFunc(func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
			// In pieces, as a stream delivers them.
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 7)
				if _, err := stdout.Write(rest[:n]); err != nil {
					return err
				}
				rest = rest[n:]
			}
			return nil
		})
		c, err := podproto.NewClient(fake, podproto.Config{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, _ = c.Run(ctx, rollout.Command{Shell: "true"})
		_, _ = c.ReadFile(ctx, "f")
		_, _ = c.SearchFiles(ctx, rollout.SearchQuery{Pattern: "x"})
		_, _ = c.ReadDir(ctx, ".")
	})
}

// Command kubetest-image writes an image that holds one static program, as a docker-archive
// tarball tagged with a name, for ctr images import. The test cluster's up step builds its
// pause image with it.
//
//	kubetest-image -o pause.tar [-path /pause] agenticopd.local/pause:3.10 ./kubetest-pause [entrypoint...]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/agentic-opd/agenticopd/internal/kubetest/binimage"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kubetest-image:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("kubetest-image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "the tarball to write")
	dst := fs.String("path", "/pause", "where the program is in the image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() < 2 {
		return fmt.Errorf("usage: kubetest-image -o OUT.tar [-path /pause] NAME PROGRAM [ENTRYPOINT...]")
	}
	tag, err := name.NewTag(fs.Arg(0))
	if err != nil {
		return err
	}
	img, err := binimage.New(fs.Arg(1), *dst, fs.Args()[2:]...)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(*out, tag, img)
}

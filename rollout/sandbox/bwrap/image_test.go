package bwrap_test

import (
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/rollout"
	"github.com/agentic-opd/agenticopd/rollout/sandbox/bwrap"
)

// repoFiles is a small Python repository with a failing test, as a SWE image holds it.
var repoFiles = map[string]string{
	"calc.py":            "def add(a, b):\n    return a - b\n",
	"tests/test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}

// newImageSandbox makes a sandbox for spec, closed at the end of the test.
func newImageSandbox(t testing.TB, f *bwrap.Factory, spec rollout.SandboxSpec) *bwrap.Sandbox {
	t.Helper()
	sb, err := f.NewSandboxFor(t.Context(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sb.Close()) })
	return sb.(*bwrap.Sandbox)
}

// imageModes are the two ways a workspace holds the image's working directory.
// The image of ref "repo:overlayfs" has its root on a file system that refuses
// idmapped mounts: its working directory is copied whatever the factory says.
var imageModes = []struct {
	name   string
	cfg    bwrap.Config
	ref    string
	copied bool
}{
	{"overlay", bwrap.Config{}, "repo:1", false},
	{"copy", bwrap.Config{CopyImageWorkspace: true}, "repo:1", true},
	{"overlay-on-disk", bwrap.Config{DisableWorkspaceMount: true}, "repo:1", false},
	{"idmap-refused", bwrap.Config{}, "repo:overlayfs", true},
}

// TestImageSandbox runs a repository's tests in an image sandbox as docker exec would
// (working directory, user root, the image's Env, HOME, HOSTNAME, /etc/hosts), and
// checks that what the code changes stays in its own workspace: the image's files,
// another sandbox of the same image, the read-only root.
func TestImageSandbox(t *testing.T) {
	src := &imageSource{}
	repo := under("testbed", gitRepo(t, repoFiles))
	imgCfg := bwrap.ImageRoot{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "FOO=from-image"}, WorkingDir: "/testbed"}
	imgDirs := map[string]string{
		"repo:1":         src.add(t, "repo:1", repo, imgCfg),
		"repo:overlayfs": src.addOverlay(t, "repo:overlayfs", repo, imgCfg),
	}
	for _, mode := range imageModes {
		t.Run(mode.name, func(t *testing.T) {
			cfg := mode.cfg
			cfg.Images = src
			f := newFactory(t, cfg)
			sb := newImageSandbox(t, f, rollout.SandboxSpec{Image: mode.ref})
			require.Equal(t, "/testbed", sb.Dir())
			require.Equal(t, mode.copied, bwrap.ImageCopied(sb), "the workspace is a copy")
			imgDir := imgDirs[mode.ref]

			res := run(t, sb, `echo "$(id -u):$(id -g) $(pwd) $HOME $HOSTNAME $(hostname) $FOO"; stat -c %u .`, 20*time.Second)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
			require.Equal(t, "0:0 /testbed /root sandbox sandbox from-image\n0\n", string(res.Stdout))

			res = run(t, sb, `python3 -c "import socket; print(socket.getaddrinfo('localhost', 80)[0][4][0])"`, 20*time.Second)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)

			// The tests run, fail, the fix is made by the file tools and in the shell,
			// and git sees the change.
			res = run(t, sb, "python3 -B -m pytest -q -p no:cacheprovider tests", time.Minute)
			require.Equal(t, 1, res.ExitCode, "stdout %s stderr %s", res.Stdout, res.Stderr)
			require.NoError(t, sb.WriteFile("calc.py", []byte("def add(a, b):\n    return a + b\n")))
			res = run(t, sb, "python3 -B -m pytest -q -p no:cacheprovider tests && echo new > new.txt && git status --porcelain", time.Minute)
			require.Zero(t, res.ExitCode, "stdout %s stderr %s", res.Stdout, res.Stderr)
			require.Contains(t, string(res.Stdout), " M calc.py\n?? new.txt\n")
			b, err := sb.ReadFile("new.txt")
			require.NoError(t, err)
			require.Equal(t, "new\n", string(b))

			// The root is read-only; the image's files are untouched.
			res = run(t, sb, "touch /usr/x || touch /etc/x || touch /root/x || echo refused", 20*time.Second)
			require.Equal(t, "refused\n", lastLine(res.Stdout), "stderr %s", res.Stderr)
			orig, err := os.ReadFile(filepath.Join(imgDir, "testbed/calc.py"))
			require.NoError(t, err)
			require.Equal(t, repoFiles["calc.py"], string(orig))

			// A second sandbox of the same image starts from the image.
			other := newImageSandbox(t, f, rollout.SandboxSpec{Image: mode.ref})
			res = run(t, other, "cat calc.py; ls new.txt 2>&1 || true", 20*time.Second)
			require.Equal(t, repoFiles["calc.py"]+"ls: cannot access 'new.txt': No such file or directory\n", string(res.Stdout))
		})
	}
	require.Equal(t, src.roots.Load(), src.released.Load(), "every root handed out is released")
}

func lastLine(b []byte) string {
	lines := strings.SplitAfter(strings.TrimRight(string(b), "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}

// TestImageSandboxConfig: spec and image config decide the working directory, the
// user and the environment.
func TestImageSandboxConfig(t *testing.T) {
	src := &imageSource{}
	files := map[string]string{
		"srv/app/main.py": "print('hi')\n",
		"etc/passwd":      "root:x:0:0:root:/root:/bin/bash\nbuilder:x:1234:1235:b:/home/builder:/bin/bash\n",
		"etc/group":       "root:x:0:\nbuilders:x:1235:\nstaff:x:50:\n",
		"home/builder/":   "",
	}
	src.add(t, "img", files, bwrap.ImageRoot{WorkingDir: "/srv/app", User: "builder", Env: []string{"A=1", "A=2"}})
	f := newFactory(t, bwrap.Config{Images: src})
	cases := []struct {
		name string
		spec rollout.SandboxSpec
		user string
		want string
	}{
		{"image defaults", rollout.SandboxSpec{Image: "img"}, "",
			"1234:1235 /srv/app /home/builder A=2\n"},
		{"spec workdir", rollout.SandboxSpec{Image: "img", WorkDir: "/srv"}, "",
			"1234:1235 /srv /home/builder A=2\n"},
		{"missing workdir is made empty", rollout.SandboxSpec{Image: "img", WorkDir: "/work/here"}, "",
			"1234:1235 /work/here /home/builder A=2\n"},
		{"user with a group name", rollout.SandboxSpec{Image: "img"}, "builder:staff",
			"1234:50 /srv/app /home/builder A=2\n"},
		{"numeric user", rollout.SandboxSpec{Image: "img"}, "77:78",
			"77:78 /srv/app / A=2\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.user != "" {
				ref := "img-" + tc.name
				src.mu.Lock()
				img := src.images["img"]
				img.cfg.User = tc.user
				src.images[ref] = img
				src.mu.Unlock()
				tc.spec.Image = ref
			}
			sb := newImageSandbox(t, f, tc.spec)
			res := run(t, sb, `echo "$(id -u):$(id -g) $(pwd) $HOME A=$A"; touch mine`, 20*time.Second)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
			require.Equal(t, tc.want, string(res.Stdout))
		})
	}
}

// TestImageSandboxCondaLoginEnv: an image with conda gets the environment its login
// shell activates (SWE-bench's activate "testbed" in /root/.bashrc, which
// /root/.profile reads) for every command, shell or not.
func TestImageSandboxCondaLoginEnv(t *testing.T) {
	src := &imageSource{}
	src.add(t, "conda", map[string]string{
		"opt/miniconda3/etc/profile.d/conda.sh": "conda() { :; }\n",
		"opt/miniconda3/envs/testbed/bin/tool":  "",
		"root/.profile":                         "if [ -n \"$BASH_VERSION\" ] && [ -f ~/.bashrc ]; then . ~/.bashrc; fi\n",
		"root/.bashrc":                          "source /opt/miniconda3/etc/profile.d/conda.sh && export CONDA_DEFAULT_ENV=testbed PATH=/opt/miniconda3/envs/testbed/bin:$PATH\n",
		"testbed/":                              "",
		"etc/profile":                           "# Ubuntu's sets no PATH (Debian's would)\n",
	}, bwrap.ImageRoot{Env: []string{"PATH=/opt/miniconda3/bin:/usr/bin:/bin"}, WorkingDir: "/testbed"})
	f := newFactory(t, bwrap.Config{Images: src})
	for i := range 2 { // the second sandbox takes the environment from the factory's cache
		sb := newImageSandbox(t, f, rollout.SandboxSpec{Image: "conda"})
		res, err := sb.Run(t.Context(), rollout.Command{Argv: []string{"/usr/bin/env"}})
		require.NoError(t, err)
		env := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		want := map[string]string{
			"CONDA_DEFAULT_ENV": "testbed",
			"PATH":              "/opt/miniconda3/envs/testbed/bin:/opt/miniconda3/bin:/usr/bin:/bin",
			"HOME":              "/root",
			"HOSTNAME":          "sandbox",
		}
		got := maps.Collect(func(yield func(string, string) bool) {
			for k := range want {
				if !yield(k, env[k]) {
					return
				}
			}
		})
		require.Empty(t, cmp.Diff(want, got), "sandbox %d (-want +got)", i)
		for _, k := range []string{"SHLVL", "OLDPWD", "_"} {
			require.NotContains(t, env, k, "the login shell's own variables are dropped")
		}
		require.Equal(t, "/testbed", env["PWD"], "bubblewrap sets PWD where the command starts")
	}
}

// TestNewSandboxForRefuses: what an image sandbox cannot be is an error, and the root
// handed out is released.
func TestNewSandboxForRefuses(t *testing.T) {
	src := &imageSource{}
	src.add(t, "file-workdir", map[string]string{"app": "not a directory"}, bwrap.ImageRoot{WorkingDir: "/app"})
	src.add(t, "bad-user", map[string]string{}, bwrap.ImageRoot{User: "nobody-here"})
	withImages := newFactory(t, bwrap.Config{Images: src})
	without := newFactory(t, bwrap.Config{})
	unconfined := newFactory(t, bwrap.Config{Images: src, Unconfined: true, UID: unconfinedUID, GID: unconfinedUID})
	cases := []struct {
		name string
		f    *bwrap.Factory
		spec rollout.SandboxSpec
		want string
		is   error
	}{
		{"unconfined", unconfined, rollout.SandboxSpec{Image: "bad-user"}, "unconfined factory runs none", bwrap.ErrImageUnsupported},
		{"no image source", without, rollout.SandboxSpec{Image: "x"}, "Config.Images is nil", bwrap.ErrNoImages},
		{"unknown image", withImages, rollout.SandboxSpec{Image: "nope"}, `no image "nope"`, nil},
		{"workdir is a file", withImages, rollout.SandboxSpec{Image: "file-workdir"}, "not a directory", nil},
		{"relative workdir", withImages, rollout.SandboxSpec{Image: "bad-user", WorkDir: "testbed"}, "must be absolute", bwrap.ErrInvalidConfig},
		{"workdir over /proc", withImages, rollout.SandboxSpec{Image: "bad-user", WorkDir: "/proc/1"}, "cannot be /proc/1", bwrap.ErrInvalidConfig},
		{"unknown user", withImages, rollout.SandboxSpec{Image: "bad-user", WorkDir: "/w"}, `User "nobody-here" is not in its /etc/passwd`, nil},
		{"workdir without an image", without, rollout.SandboxSpec{WorkDir: "/testbed"}, "needs an image", bwrap.ErrInvalidConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := tc.f.NewSandboxFor(t.Context(), tc.spec)
			require.Error(t, err)
			require.Nil(t, sb)
			require.Contains(t, err.Error(), tc.want)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
		})
	}
	require.Equal(t, src.roots.Load(), src.released.Load(), "every root handed out is released")
}

// TestSandboxSpecNetwork: spec.Network keeps the host's network (a server on the
// host's loopback is reached); without it the sandbox has only a loopback of its own,
// for plain and image sandboxes alike.
func TestSandboxSpecNetwork(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello from the host\n"))
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	src := &imageSource{}
	src.add(t, "net", map[string]string{"testbed/": ""}, bwrap.ImageRoot{WorkingDir: "/testbed"})
	f := newFactory(t, bwrap.Config{Images: src})
	script := fmt.Sprintf(`python3 -c "
import socket
try:
    print(socket.create_connection(('127.0.0.1', %d), timeout=5).recv(100).decode().strip())
except OSError as e:
    print(type(e).__name__)
"`, port)
	for _, tc := range []struct {
		name string
		spec rollout.SandboxSpec
		want string
	}{
		{"plain", rollout.SandboxSpec{}, "ConnectionRefusedError\n"},
		{"plain with network", rollout.SandboxSpec{Network: true}, "hello from the host\n"},
		{"image", rollout.SandboxSpec{Image: "net"}, "ConnectionRefusedError\n"},
		{"image with network", rollout.SandboxSpec{Image: "net", Network: true}, "hello from the host\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newImageSandbox(t, f, tc.spec)
			res := run(t, sb, script, 20*time.Second)
			require.Zero(t, res.ExitCode, "stderr %s", res.Stderr)
			require.Equal(t, tc.want, string(res.Stdout))
		})
	}
}

// TestImageWorkspaceSpecialFiles: the image's working directory holds symlinks that
// point out of it (to a host-looking path, up the tree) and a FIFO. Either way the
// workspace is made, the symlinks stay symlinks (the copy never follows them on the
// host), and the FIFO blocks nothing.
func TestImageWorkspaceSpecialFiles(t *testing.T) {
	src := &imageSource{}
	dir := src.add(t, "special", map[string]string{"testbed/a.py": "A = 1\n"}, bwrap.ImageRoot{WorkingDir: "/testbed"})
	require.NoError(t, os.Symlink("/etc/shadow", filepath.Join(dir, "testbed/abs")))
	require.NoError(t, os.Symlink("../../../../etc", filepath.Join(dir, "testbed/up")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "testbed/fifo"), 0o644))
	for _, mode := range imageModes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			cfg := mode.cfg
			cfg.Images = src
			sb := newImageSandbox(t, newFactory(t, cfg), rollout.SandboxSpec{Image: "special"})
			require.Equal(t, mode.copied, bwrap.ImageCopied(sb))
			res := run(t, sb, "readlink abs up; cat a.py; test -p fifo && echo fifo; true", 20*time.Second)
			want := "/etc/shadow\n../../../../etc\nA = 1\n"
			if !mode.copied {
				want += "fifo\n" // the overlay shows the image's FIFO; the copy skips it
			}
			require.Equal(t, want, string(res.Stdout), "stderr %s", res.Stderr)
			_, err := sb.ReadFile("abs")
			require.Error(t, err, "the file tools do not follow a symlink out of the workspace")
		})
	}
}

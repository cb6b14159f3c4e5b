package testimage_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMirrorFromAptSources runs build-root.sh --mirror on apt directories made in a
// temporary directory: the mirror a build uses is the first Debian archive of apt's
// sources, or $AGENTICOPD_DEBIAN_MIRROR.
func TestMirrorFromAptSources(t *testing.T) {
	const (
		debianSources = "Types: deb\n# a comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n" +
			"Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n"
		securityFirst = "Types: deb\nURIs: http://security.example/debian-security/\nSuites: bookworm-security\nComponents: main\n\n" +
			"Types: deb deb-src\nURIs: http://mirror.example/debian/ http://other.example/debian\nSuites: stable\nComponents: main\n"
		thirdParty = "Types: deb\nURIs: https://vendor.example/node_20.x\nSuites: nodistro\nComponents: main\n"
	)
	for _, tc := range []struct {
		name     string
		files    map[string]string // under the apt directory
		override string            // $AGENTICOPD_DEBIAN_MIRROR
		want     string            // "" for a failure
	}{
		{name: "deb822, main archive before security", files: map[string]string{"sources.list.d/debian.sources": debianSources}, want: "http://mirror.example/debian"},
		{name: "deb822, security first, trailing slash", files: map[string]string{"sources.list.d/debian.sources": securityFirst}, want: "http://mirror.example/debian"},
		{name: "deb822, disabled and source-only stanzas", files: map[string]string{"sources.list.d/debian.sources": "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n\n" +
			"Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n" +
			"Types: deb\nURIs: http://on.example/debian\nSuites: bookworm\n"}, want: "http://on.example/debian"},
		{name: "deb822, folded suites", files: map[string]string{"sources.list.d/debian.sources": "Types: deb\nURIs: http://mirror.example/debian\nSuites:\n bookworm\n bookworm-updates\n"}, want: "http://mirror.example/debian"},
		{name: "sources.list", files: map[string]string{"sources.list": "# deb http://commented.example/debian bookworm main\n" +
			"deb http://security.example/debian-security bullseye-security main\n" +
			"deb http://security.example/debian-security buster/updates main\n" +
			"deb-src http://src.example/debian bullseye main\n" +
			"deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://mirror.example/debian/ bullseye main contrib"}, want: "http://mirror.example/debian"},
		{name: "third party in sources.list.d, Debian in a .list", files: map[string]string{
			"sources.list.d/nodesource.sources": thirdParty,
			"sources.list.d/debian.list":        "deb http://list.example/debian sid main\n",
		}, want: "http://list.example/debian"},
		{name: ".sources before sources.list", files: map[string]string{
			"sources.list":                  "deb http://list.example/debian bookworm main\n",
			"sources.list.d/debian.sources": debianSources,
		}, want: "http://mirror.example/debian"},
		{name: "disabled file names do not count", files: map[string]string{"sources.list.d/debian.sources.disabled": debianSources}},
		{name: "no Debian suite", files: map[string]string{
			"sources.list.d/nodesource.sources": thirdParty,
			"sources.list":                      "deb http://ubuntu.example/ubuntu jammy main\n",
		}},
		{name: "nothing"},
		{name: "override", files: map[string]string{"sources.list.d/debian.sources": debianSources}, override: "http://override.example/debian", want: "http://override.example/debian"},
		{name: "override without sources", override: "http://override.example/debian", want: "http://override.example/debian"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(dir, "sources.list.d"), 0o755))
			for name, body := range tc.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
			}
			cmd := exec.Command("bash", "build-root.sh", "--mirror", dir)
			cmd.Env = append(os.Environ(), "AGENTICOPD_DEBIAN_MIRROR="+tc.override)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if tc.want != "" {
				require.NoError(t, err, stderr.String())
				require.Equal(t, tc.want+"\n", stdout.String())
				return
			}
			require.Error(t, err)
			require.Empty(t, stdout.String())
			for _, place := range []string{dir + "/sources.list.d/*.sources", dir + "/sources.list", "AGENTICOPD_DEBIAN_MIRROR"} {
				require.Contains(t, stderr.String(), place, "the failure names where to put a mirror")
			}
		})
	}
}

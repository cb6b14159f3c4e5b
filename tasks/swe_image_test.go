package tasks_test

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/stretchr/testify/require"

	"github.com/agentic-opd/agenticopd/tasks"
)

// TestSWEImageReferences: a row's image reference is used as it is when it names a
// registry or a namespace, or an image on the local disk (an OCI layout, a docker
// archive, whatever its path looks like); only a bare name gets the prefix.
func TestSWEImageReferences(t *testing.T) {
	const digest = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	for _, tc := range []struct {
		name  string
		field string // the row's column: image, image_name or docker_image
		ref   string
		smith bool // a SWE-smith row (image_name, a bug patch, no test patch)
		want  string
	}{
		{name: "OCI layout, relative path and tag", field: "image", ref: "oci-layout:mmlayout:swe-go",
			want: "oci-layout:mmlayout:swe-go"},
		{name: "OCI layout, relative path", field: "image_name", ref: "oci-layout:layout", want: "oci-layout:layout"},
		{name: "OCI layout, absolute path", field: "image", ref: "oci-layout:/srv/images/layout",
			want: "oci-layout:/srv/images/layout"},
		{name: "OCI layout, absolute path and tag", field: "docker_image", ref: "oci-layout:/srv/layout:v1",
			want: "oci-layout:/srv/layout:v1"},
		{name: "OCI layout, digest", field: "image", ref: "oci-layout:layout@" + digest, want: "oci-layout:layout@" + digest},
		{name: "docker archive, relative file", field: "image", ref: "docker-archive:file.tar",
			want: "docker-archive:file.tar"},
		{name: "docker archive, absolute file", field: "image_name", ref: "docker-archive:/x/y.tar",
			want: "docker-archive:/x/y.tar"},
		{name: "docker archive, file and repository tag", field: "image", ref: "docker-archive:images.tar:swe/toy:1",
			want: "docker-archive:images.tar:swe/toy:1"},
		{name: "SWE-smith row, OCI layout: nothing rewritten", field: "image_name", smith: true,
			ref: "oci-layout:smith__layout:swesmith.x86_64.pallets__flask", want: "oci-layout:smith__layout:swesmith.x86_64.pallets__flask"},
		{name: "SWE-smith row, docker archive: nothing rewritten", field: "image_name", smith: true,
			ref: "docker-archive:pallets__flask.tar", want: "docker-archive:pallets__flask.tar"},
		{name: "bare name", field: "image", ref: "sweb.eval.x86_64.flask:v1", want: "swebench/sweb.eval.x86_64.flask:v1"},
		{name: "bare name without tag", field: "docker_image", ref: "toy", want: "swebench/toy"},
		{name: "bare name with digest", field: "image", ref: "toy@" + digest, want: "swebench/toy@" + digest},
		{name: "SWE-smith bare name", field: "image_name", smith: true, ref: "swesmith.x86_64.pallets__flask.bc098406",
			want: "swebench/swesmith.x86_64.pallets_1776_flask.bc098406"},
		{name: "namespace", field: "image_name", ref: "namanjain12/pandas_final:abc", want: "namanjain12/pandas_final:abc"},
		{name: "registry", field: "image", ref: "registry.example/acme/widgets:1", want: "registry.example/acme/widgets:1"},
		{name: "registry with port", field: "image", ref: "127.0.0.1:5000/swe/toy:latest", want: "127.0.0.1:5000/swe/toy:latest"},
		{name: "localhost registry", field: "image", ref: "localhost/toy", want: "localhost/toy"},
		{name: "registry and digest", field: "image", ref: "registry.local:5000/x/y@" + digest,
			want: "registry.local:5000/x/y@" + digest},
		{name: "Docker Hub, full", field: "image", ref: name.DefaultRegistry + "/library/ubuntu:22.04",
			want: name.DefaultRegistry + "/library/ubuntu:22.04"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			over := map[string]any{tc.field: tc.ref}
			if tc.smith {
				over["test_patch"], over["patch"] = nil, "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n"
				over["image"], over["docker_image"] = nil, nil
			}
			got, err := tasks.ReadSWEJSONL(strings.NewReader(sweLine(t, over)), "rows.jsonl", tasks.SWEConfig{})
			require.NoError(t, err)
			require.Equal(t, tc.want, got[0].Repo.Image)
		})
	}
}

// TestSWEImagePrefixNeverBeforeTransport: a configured prefix goes before bare
// names only, never before a reference to an image on the local disk.
func TestSWEImagePrefixNeverBeforeTransport(t *testing.T) {
	cfg := tasks.SWEConfig{ImagePrefix: "mirror.local/swe/"}
	for ref, want := range map[string]string{
		"oci-layout:mmlayout:swe-go": "oci-layout:mmlayout:swe-go",
		"docker-archive:file.tar":    "docker-archive:file.tar",
		"toy:1":                      "mirror.local/swe/toy:1",
	} {
		got, err := tasks.ReadSWEJSONL(strings.NewReader(sweLine(t, map[string]any{"image": ref})), "rows.jsonl", cfg)
		require.NoError(t, err)
		require.Equal(t, want, got[0].Repo.Image, "reference %s", ref)
	}
}

// TestSWEDefaultImagePrefixIsDockerHub: [tasks.DefaultImagePrefix] writes no registry,
// yet names SWE-bench's images on Docker Hub: parsed as package images parses it
// (strictly, then with go-containerregistry's defaults), a reference it builds is the
// same image as the fully qualified one, on name.DefaultRegistry.
func TestSWEDefaultImagePrefixIsDockerHub(t *testing.T) {
	for _, tc := range []struct {
		name string
		over map[string]any
		repo string // the repository on Docker Hub
		tag  string
	}{
		{name: "SWE-bench's convention", over: map[string]any{"instance_id": "psf__requests-2"},
			repo: "swebench/sweb.eval.x86_64.psf_1776_requests-2", tag: "latest"},
		{name: "bare name", over: map[string]any{"image": "sweb.eval.x86_64.flask:v1"},
			repo: "swebench/sweb.eval.x86_64.flask", tag: "v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tasks.ReadSWEJSONL(strings.NewReader(sweLine(t, tc.over)), "rows.jsonl", tasks.SWEConfig{})
			require.NoError(t, err)
			ref := got[0].Repo.Image
			_, err = name.ParseReference(ref, name.StrictValidation)
			require.Error(t, err, "%s names no registry", ref)
			r, err := name.ParseReference(ref)
			require.NoError(t, err)
			require.Equal(t, name.DefaultRegistry, r.Context().RegistryStr(), ref)
			require.Equal(t, tc.repo, r.Context().RepositoryStr(), ref)
			full, err := name.ParseReference(name.DefaultRegistry+"/"+tc.repo+":"+tc.tag, name.StrictValidation)
			require.NoError(t, err)
			require.Equal(t, full.Name(), r.Name())
		})
	}
}

#!/bin/sh
# make-testbed.sh OUT: writes OUT/testbed, the Go toy repository of repo/ as a git work
# tree with one commit of a fixed identity and date, so its hash (the task's base
# commit, see tasks.jsonl) is the same on every machine, and prints that hash.
# OUT/testbed is the layer images/imagestest's SWEGoRef puts at /testbed. Needs git and
# a POSIX shell.
set -eu
out=${1:?usage: make-testbed.sh OUT}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out/testbed"
mkdir -p "$out/testbed"
cp -R "$here/repo/." "$out/testbed/"
cd "$out/testbed"
find . -type d -exec chmod 0755 {} +
find . -type f -exec chmod 0644 {} +
export GIT_AUTHOR_NAME=toy GIT_AUTHOR_EMAIL=toy@example.com \
	GIT_COMMITTER_NAME=toy GIT_COMMITTER_EMAIL=toy@example.com \
	GIT_AUTHOR_DATE=2020-01-01T00:00:00Z GIT_COMMITTER_DATE=2020-01-01T00:00:00Z \
	GIT_CONFIG_NOSYSTEM=1 HOME="$out"
git init -q -b main .
git add -A
git commit -q -m base
git rev-parse HEAD

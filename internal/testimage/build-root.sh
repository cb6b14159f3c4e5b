#!/usr/bin/env bash
# build-root.sh DEST: builds the test image's root file system into the directory DEST
# (which must not exist, or be empty) with mmdebstrap, from Debian's own mirror: Debian
# bookworm, variant minbase, with python3, pytest, git, patch, bash, coreutils and
# ca-certificates, what a SWE-style repository's tests need. No documentation, manual
# pages or locales (dpkg path excludes), no apt lists or caches, and an empty /dev (a
# sandbox supplies its own), so the root packs into a layer anyone can unpack.
#
# Package testimage runs it once per version of this file and caches the result; run it
# by hand only to look at the root: sudo ./build-root.sh /tmp/root
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 DEST" >&2
  exit 2
fi
dest=$1
mirror=${AGENTICOPD_DEBIAN_MIRROR:-http://deb.debian.org/debian}

command -v mmdebstrap >/dev/null 2>&1 || {
  echo "build-root.sh: mmdebstrap not found: apt-get install -y --no-install-recommends mmdebstrap" >&2
  exit 1
}

mmdebstrap \
  --quiet \
  --variant=minbase \
  --include=python3,python3-pytest,git,patch,bash,coreutils,ca-certificates \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/log/apt/* "$1"/var/log/dpkg.log "$1"/tmp/*' \
  bookworm "$dest" "$mirror"
# After mmdebstrap, which mounts /dev while it runs: device nodes would not unpack
# without privileges, and a sandbox brings its own /dev.
find "$dest/dev" -mindepth 1 -delete

#!/usr/bin/env bash
# build-root.sh DEST [VARIANT]: builds a test image's root file system into the directory
# DEST (which must not exist, or be empty) with mmdebstrap, variant minbase, from the
# Debian mirror this machine's apt uses. VARIANT is one of
#   bookworm   (the default) Debian 12 with python3 (3.11), pytest, git, patch, bash,
#              coreutils and ca-certificates: what a SWE-style repository's tests need;
#   oldpython  the same packages from Debian 11 (bullseye): Python 3.9 and pytest 6.0,
#              as in the SWE-bench images, which run Python 3.6 to 3.9;
#   golang     Debian 12 with golang-go (Go 1.19), gcc and libc6-dev (cgo, as the
#              official Go images have them), git, patch, bash, coreutils and
#              ca-certificates: what a Go repository's `go test` needs.
# No documentation, manual pages or locales (dpkg path excludes), no apt lists or caches,
# and an empty /dev (a sandbox supplies its own), so the root packs into a layer anyone
# can unpack.
#
# The mirror is $AGENTICOPD_DEBIAN_MIRROR when set; otherwise the first Debian archive in
# apt's sources: the URIs of a deb822 stanza in /etc/apt/sources.list.d/*.sources, then a
# "deb URI SUITE ..." line of /etc/apt/sources.list or /etc/apt/sources.list.d/*.list,
# whose suite is a Debian release (security archives left out). That mirror must still
# carry bullseye for the oldpython variant.
#
# build-root.sh --mirror [APT_DIR] prints the mirror a build would use, looking in APT_DIR
# (default /etc/apt) for the sources, and fails as a build would when there is none.
#
# Package testimage runs it once per version of this file and variant and caches the
# result; run it by hand only to look at a root: sudo ./build-root.sh /tmp/root oldpython
set -euo pipefail

# debian_suite SUITE reports whether SUITE is a suite of Debian's main archive: a
# release's codename or alias, possibly with -updates, -backports or -proposed-updates.
debian_suite() {
  [[ $1 =~ ^(buster|bullseye|bookworm|trixie|forky|duke|sid|oldoldstable|oldstable|stable|testing|unstable)(-updates|-backports|-proposed-updates)?$ ]]
}

# sources APT_DIR prints a line "URI SUITE..." for each enabled deb source under APT_DIR:
# the stanzas of sources.list.d/*.sources (deb822; the first of their URIs), then the deb
# lines of sources.list and sources.list.d/*.list.
sources() {
  local dir=$1 f line
  shopt -s nullglob
  for f in "$dir"/sources.list.d/*.sources; do
    awk '
      function flush() {
        if (uris != "" && suites != "" && types ~ /(^| )deb( |$)/ && tolower(enabled) != "no") {
          split(uris, u, " "); print u[1], suites
        }
        types = ""; uris = ""; suites = ""; enabled = ""; key = ""
      }
      /^#/ { next }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]/ { # a folded field continues
        val = $0; gsub(/^[ \t]+|[ \t]+$/, "", val)
        if (key == "uris") uris = uris " " val; else if (key == "suites") suites = suites " " val
        next
      }
      {
        key = tolower($0); sub(/:.*/, "", key)
        val = $0; sub(/^[^:]*:[ \t]*/, "", val); sub(/[ \t]+$/, "", val)
        if (key == "types") types = val
        else if (key == "uris") uris = val
        else if (key == "suites") suites = val
        else if (key == "enabled") enabled = val
      }
      END { flush() }' "$f"
  done
  for f in "$dir"/sources.list "$dir"/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    while IFS= read -r line || [ -n "$line" ]; do
      line=${line%%#*}
      [[ $line =~ ^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+)[[:space:]]+([^[:space:]]+) ]] || continue
      echo "${BASH_REMATCH[2]} ${BASH_REMATCH[3]}"
    done <"$f"
  done
}

# sources_mirror APT_DIR prints the URI, without a trailing slash, of the first source
# under APT_DIR with a Debian suite (so no security archive, no third party's), or fails.
sources_mirror() {
  local uri suites s
  while read -r uri suites; do
    for s in $suites; do
      if debian_suite "$s"; then
        echo "${uri%/}"
        return 0
      fi
    done
  done < <(sources "$1")
  echo "build-root.sh: no Debian mirror in apt's sources: none in the URIs of $1/sources.list.d/*.sources nor in a deb line of $1/sources.list (or $1/sources.list.d/*.list); set AGENTICOPD_DEBIAN_MIRROR to a Debian mirror's URL" >&2
  return 1
}

# mirror APT_DIR prints the mirror to build from: $AGENTICOPD_DEBIAN_MIRROR, or apt's.
mirror() {
  if [ -n "${AGENTICOPD_DEBIAN_MIRROR:-}" ]; then
    echo "$AGENTICOPD_DEBIAN_MIRROR"
  else
    sources_mirror "$1"
  fi
}

if [ "${1:-}" = --mirror ]; then
  mirror "${2:-/etc/apt}"
  exit
fi
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 DEST [bookworm|oldpython|golang]" >&2
  echo "       $0 --mirror [APT_DIR]" >&2
  exit 2
fi
dest=$1
case ${2:-bookworm} in
  bookworm)
    suite=bookworm
    packages=python3,python3-pytest,git,patch,bash,coreutils,ca-certificates ;;
  oldpython)
    suite=bullseye
    packages=python3,python3-pytest,git,patch,bash,coreutils,ca-certificates ;;
  golang)
    suite=bookworm
    packages=golang-go,gcc,libc6-dev,git,patch,bash,coreutils,ca-certificates ;;
  *)
    echo "build-root.sh: unknown variant $2: bookworm, oldpython or golang" >&2
    exit 2 ;;
esac
mirror=$(mirror /etc/apt)

command -v mmdebstrap >/dev/null 2>&1 || {
  echo "build-root.sh: mmdebstrap not found: apt-get install -y --no-install-recommends mmdebstrap" >&2
  exit 1
}

mmdebstrap \
  --quiet \
  --variant=minbase \
  --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/log/apt/* "$1"/var/log/dpkg.log "$1"/tmp/*' \
  "$suite" "$dest" "$mirror"
# After mmdebstrap, which mounts /dev while it runs: device nodes would not unpack
# without privileges, and a sandbox brings its own /dev.
find "$dest/dev" -mindepth 1 -delete

#!/usr/bin/env bash
# Copies the checkout's sources (tracked files, and new ones git does not
# ignore; modification times kept) into DEST, keeping DEST/build: a build
# from the copy sees none of the files other tests create and delete under
# build/ meanwhile, and its build/ stands where the checkout's does
# relative to the sources, so ccache (whose base folder CMakeLists.txt sets
# to the sources) serves its compiles from the checkout's build.
#
#   test/snapshot_sources.sh DEST
#
# Prints the folder to build from: DEST, or the checkout itself where it is
# not a git work tree (nothing is copied then).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${1:?usage: snapshot_sources.sh DEST}"
if ! git -C "$ROOT" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  echo "$ROOT"
  exit 0
fi
mkdir -p "$DEST"
find "$DEST" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
(cd "$ROOT" && git ls-files -z -co --exclude-standard |
  tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$DEST"
echo "$DEST"

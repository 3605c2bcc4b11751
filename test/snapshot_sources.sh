#!/usr/bin/env bash
# Copies the checkout's sources (tracked files, and new ones git does not
# ignore; modification times kept) into WORK/src, keeping its build/: a build
# from the copy sees none of the files other tests create and delete under
# build/ meanwhile, and its build/ stands where the checkout's does
# relative to the sources, so ccache (whose base folder CMakeLists.txt sets
# to the sources) serves its compiles from the checkout's build.
#
#   test/snapshot_sources.sh WORK
#
# Copies into WORK/src and prints two lines: the folder to build from and
# the build folder (WORK/src, WORK/src/build); where the checkout is not a
# git work tree nothing is copied, and it prints the checkout and
# WORK/build.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:?usage: snapshot_sources.sh WORK}"
if ! git -C "$ROOT" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  printf '%s\n%s\n' "$ROOT" "$WORK/build"
  exit 0
fi
DEST="$WORK/src"
mkdir -p "$DEST"
find "$DEST" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
(cd "$ROOT" && git ls-files -z -co --exclude-standard |
  tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$DEST"
printf '%s\n%s\n' "$DEST" "$DEST/build"

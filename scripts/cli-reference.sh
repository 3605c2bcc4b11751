#!/usr/bin/env bash
# Writes docs/cli.md: every tool's --help, from a build's tools.
#
#   scripts/cli-reference.sh [--check] [BUILD_DIR]     (default: build)
#
# --check writes nothing: it fails, with the difference, when docs/cli.md is
# not what the tools print (a ctest runs it).
set -euo pipefail
cd "$(dirname "$0")/.."
CHECK=0
if [ "${1:-}" = "--check" ]; then
  CHECK=1
  shift
fi
BIN=${1:-build}/bin
OUT=docs/cli.md
TMP="$OUT.tmp"
[ "$CHECK" = 1 ] && TMP=$(mktemp)
{
  echo "# CLI reference"
  echo
  echo "Each tool's \`--help\`, as built (regenerate with"
  echo "\`scripts/cli-reference.sh\`). The [user guide](user-guide.md) explains"
  echo "what the options are for."
  for tool in strata-compile strata-run strata-export strata-inspect \
      strata-calibrate strata-iobench strata-kernel-check; do
    if [ ! -x "$BIN/$tool" ]; then
      echo "cli-reference: $BIN/$tool is missing: build first" >&2
      exit 1
    fi
    echo
    echo "## $tool"
    echo
    echo '```'
    STRATA_PROFILE="" "$BIN/$tool" --help 2>&1
    echo '```'
  done
} > "$TMP"
if [ "$CHECK" = 1 ]; then
  if ! diff -u "$OUT" "$TMP"; then
    rm -f "$TMP"
    echo "cli-reference: $OUT is stale: run scripts/cli-reference.sh" >&2
    exit 1
  fi
  rm -f "$TMP"
  echo "cli-reference: $OUT matches the tools' --help"
  exit 0
fi
mv "$TMP" "$OUT"
echo "cli-reference: wrote $OUT"

#!/usr/bin/env bash
# Writes docs/cli.md: every tool's --help, from a build's tools.
#
#   scripts/cli-reference.sh [BUILD_DIR]     (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build}/bin
OUT=docs/cli.md
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
} > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "cli-reference: wrote $OUT"

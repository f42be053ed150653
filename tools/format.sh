#!/usr/bin/env bash
# Applies .clang-format to every tracked C file, or with --check lists the files that
# differ from it and exits 1 (the test command runs the check).
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$fmt" ]; then
  echo "format: clang-format not found (apt-get install clang-format-14)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.c' '*.h')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$fmt" --style=file "$f" | cmp -s - "$f"; then
      echo "format: $f differs from .clang-format (tools/format.sh fixes it)"
      bad=$((bad + 1))
    fi
  done
  echo "format: ${#files[@]} files checked, $bad differ"
  [ "$bad" -eq 0 ]
else
  "$fmt" --style=file -i "${files[@]}"
fi

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
  # clang-format's own check (--dry-run --Werror names every place that differs), a few
  # dozen files a process and one process a core: a process per file took 25-45 s.
  mapfile -t differ < <(printf '%s\0' "${files[@]}" |
    xargs -0 -n 25 -P "$(nproc)" "$fmt" --style=file --dry-run --Werror 2>&1 |
    sed -nE 's/^([^: ]+\.[ch]):[0-9]+:[0-9]+: error: .*/\1/p' | sort -u)
  for f in ${differ[@]+"${differ[@]}"}; do
    echo "format: $f differs from .clang-format (tools/format.sh fixes it)"
  done
  echo "format: ${#files[@]} files checked, ${#differ[@]} differ"
  [ "${#differ[@]}" -eq 0 ]
else
  "$fmt" --style=file -i "${files[@]}"
fi

#!/usr/bin/env bash
# Fails if any C++ source differs from clang-format's output (config: .clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.h' '*.cc' 2>/dev/null || find . -path ./build -prune -o \( -name '*.h' -o -name '*.cc' \) -print)
bad=0
for f in $files; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not clang-formatted: $f (run: clang-format -i $f)"
    bad=1
  fi
done
exit $bad

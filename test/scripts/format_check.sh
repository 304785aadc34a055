#!/bin/sh
# Checks that the C++ sources follow .clang-format (the C files keep the C style of
# rdma-core's own examples, and are not checked). Formatting differs between
# clang-format versions: the check runs with the one the project formats with
# (Debian 12's clang-format 14) and skips (exit 77) with another, saying so.
#
#   format_check.sh SOURCE_DIR CLANG_FORMAT
set -u
src=$1 clang_format=$2
version=$("$clang_format" --version 2>/dev/null | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$version" != 14 ]; then
    echo "SKIPPED: $clang_format is version '${version:-unknown}'; the sources are formatted with clang-format 14"
    exit 77
fi
cd "$src" || exit 1
failed=0
for f in $(find include src test samples bench examples -name '*.cpp' -o -name '*.hpp' 2>/dev/null | sort); do
    if ! "$clang_format" --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (clang-format -i $f)"
        failed=$((failed + 1))
    fi
done
[ "$failed" -eq 0 ] || { echo "FAILED: $failed files differ from .clang-format"; exit 1; }
echo "OK: every C++ source follows .clang-format"

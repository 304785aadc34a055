#!/bin/sh
# The files that compile a program's sources as one (cmake/RdmaAsioUnity.cmake)
# include them by relative path: an absolute one names the clone's directory (in
# __FILE__, in every Catch2 assertion), and the compiler cache then compiles the
# program again in every new clone.
#   unity_paths_test.sh FILE...
set -eu
[ "$#" -gt 0 ] || { echo "unity_paths_test: no file given" >&2; exit 2; }
status=0
for file in "$@"; do
    [ -s "$file" ] || { echo "unity_paths_test: $file is missing or empty" >&2; status=1; continue; }
    if grep -n '^#include "/' "$file"; then
        echo "unity_paths_test: $file includes a source by absolute path (above)" >&2
        status=1
    fi
    grep -q '^#include "' "$file" || { echo "unity_paths_test: $file includes nothing" >&2; status=1; }
done
exit "$status"

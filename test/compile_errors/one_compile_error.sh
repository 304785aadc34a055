#!/bin/sh
# Compiles SOURCE with COMPILER and FLAGS, which lack something the library needs,
# and checks that the compiler stops at the library's one error, which names
# EXPECTED (the flag to add): at most two diagnostics (the #error and the stop).
#
#   one_compile_error.sh EXPECTED SOURCE COMPILER [FLAGS]...
#
# SKIP_IF_IT_COMPILES set: a toolchain that compiles SOURCE anyway is reported and
# skipped (exit 77) instead of failing.
set -u
expected=$1 source=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" -fsyntax-only "$source" >"$out" 2>&1
status=$?
cat "$out"
if [ "$status" -eq 0 ]; then
    # A newer compiler or Asio may enable what the flags leave out by itself.
    [ -n "${SKIP_IF_IT_COMPILES:-}" ] && { echo "SKIPPED: this toolchain needs no such flag"; exit 77; }
    echo "FAILED: it compiled"
    exit 1
fi
grep -F -q -- "$expected" "$out" || { echo "FAILED: no error names '$expected'"; exit 1; }
# Each diagnostic line says "error" once, and its source echo may repeat it.
diagnostics=$(grep -c -E "^[^ ].*: (fatal )?error: " "$out")
[ "$diagnostics" -le 2 ] || { echo "FAILED: $diagnostics errors, expected the library's one and the stop"; exit 1; }
echo "OK: one error, naming '$expected'"

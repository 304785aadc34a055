#!/bin/sh
# Runs a command and passes only when it exits with STATUS and its output (stdout
# and stderr) contains TEXT. The checks that a test which cannot run where it must
# (no device in the VM, no fabric in the subnet step) fails instead of skipping.
#
#   expect_exit.sh STATUS TEXT -- command [args...]
set -u
want=$1 text=$2
shift 2
[ "${1:-}" = "--" ] && shift
out=$("$@" 2>&1)
got=$?
printf '%s\n' "$out"
echo "expect_exit: exit status $got (want $want)"
[ "$got" -eq "$want" ] || exit 1
printf '%s\n' "$out" | grep -qF -- "$text" || { echo "expect_exit: no '$text' in the output"; exit 1; }

#!/bin/sh
# Checks a sample's command line as a user of rdma-core's tools would expect it:
#   -h and --help print "Usage: NAME ...", a one-line description and the options
#   on stdout and exit 0; an unknown option and each BAD_ARGS (one invocation
#   each, split on spaces) print the problem and the usage on stderr and exit 2.
# None of it needs an RDMA device: the command line is read before any is opened.
#
#   check_cli.sh PROGRAM [BAD_ARGS]...
set -u
prog=${1:?usage: check_cli.sh PROGRAM [BAD_ARGS]...}
shift
name=$(basename "$prog")
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

for help in -h --help; do
    timeout 10 "$prog" $help >"$out" 2>"$err"
    status=$?
    echo "== $name $help -> exit status $status"
    cat "$out" "$err"
    [ "$status" -eq 0 ] || fail "$name $help: exit status $status, expected 0"
    head -n 1 "$out" | grep -q "^Usage: $name" || fail "$name $help: no 'Usage: $name' line first"
    [ -n "$(sed -n 2p "$out")" ] || fail "$name $help: no description on the second line"
    grep -q -- "-h, --help" "$out" || fail "$name $help: -h, --help not listed"
    [ -s "$err" ] && fail "$name $help: wrote to stderr"
done

check_bad() { # ARGS...: a usage error
    timeout 10 "$prog" "$@" >"$out" 2>"$err"
    status=$?
    echo "== $name $* -> exit status $status"
    cat "$out" "$err"
    [ "$status" -eq 2 ] || fail "$name $*: exit status $status, expected 2"
    grep -q "^$name: " "$err" || fail "$name $*: no '$name: problem' line on stderr"
    grep -q "^Usage: $name" "$err" || fail "$name $*: no usage on stderr"
    grep -qi "terminate" "$err" && fail "$name $*: std::terminate"
}
check_bad --no-such-option
for args in "$@"; do
    # shellcheck disable=SC2086 # split on purpose
    check_bad $args
done

[ "$failures" -eq 0 ] && echo "OK: $name's command line" || exit 1

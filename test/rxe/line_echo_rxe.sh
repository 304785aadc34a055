#!/bin/sh
# docs/stream.md's first program on rxe0 loopback (10.0.0.1): line_echo serves,
# line_echo -c sends three lines and prints each echo, in order. Every wait is
# bounded.
#
#   line_echo_rxe.sh LINE_ECHO PORT
set -u
prog=${1:?usage: line_echo_rxe.sh LINE_ECHO PORT} port=${2:?}
. "$(dirname "$0")/require_rxe0.sh"
out=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill -KILL "$server" 2>/dev/null
    rm -rf "$out"
}
trap cleanup EXIT
fail() {
    echo "FAILED: $*"
    echo "--- server:"; cat "$out/server"
    echo "--- client:"; cat "$out/client" 2>/dev/null
    exit 1
}
"$prog" -a 10.0.0.1 -p "$port" >"$out/server" 2>&1 &
server=$!
deadline=$(($(date +%s) + 60))
until grep -q "^listening on 10.0.0.1 port $port" "$out/server"; do
    [ "$(date +%s)" -gt "$deadline" ] && fail "the server did not listen within 60 s"
    sleep 0.2
done
timeout 60 "$prog" -c 10.0.0.1 -p "$port" one "two words" three >"$out/client" 2>&1 ||
    fail "the client exited with $?"
printf 'one\ntwo words\nthree\n' | cmp -s - "$out/client" || fail "the echoes differ"
echo "ok: three lines echoed in order"

# Sourced by the rxe tests that run a sample's server in the background and its
# client in front: a scratch directory $out, the server started with its output in
# $out/server, killed and cleaned up on exit, and a bounded wait for its lines.
#
#   . "$(dirname "$0")/background_server.sh"
#   start_server SERVER [ARGS...]
#   wait_for COUNT PATTERN
out=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT

start_server() {
    "$@" >"$out/server" 2>&1 &
    pid=$!
}

# Waits at most 60 s for COUNT lines of the server's output matching PATTERN; fails
# the test, with the server's output, if they do not come or the server exits.
wait_for() {
    i=0
    while [ "$(grep -c "$2" "$out/server")" -lt "$1" ]; do
        i=$((i + 1))
        [ $i -le 600 ] || { echo "server: no '$2' (x$1) after 60 s"; cat "$out/server"; exit 1; }
        kill -0 "$pid" 2>/dev/null || { echo "server exited:"; cat "$out/server"; exit 1; }
        sleep 0.1
    done
}

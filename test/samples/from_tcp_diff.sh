#!/bin/sh
# The change from a TCP sample to its RDMA form: a unified diff of the two files'
# code (each file's opening comment, which says what the file is, left out), with
# one line of context, labelled with the paths given.
#
#   from_tcp_diff.sh TCP_FILE RDMA_FILE            print the diff
#   from_tcp_diff.sh --max N TCP_FILE RDMA_FILE    fail unless the RDMA file has at
#                                                  most N lines the TCP file has not
# docs/from-tcp.md shows these diffs (test/docs/check-snippets.sh compares them).
set -eu
max=
if [ "${1:-}" = --max ]; then
    max=${2:?--max needs a number}
    shift 2
fi
tcp=${1:?usage: from_tcp_diff.sh [--max N] TCP_FILE RDMA_FILE} rdma=${2:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The code: everything from the first line that is not a // comment on.
code() { awk 'started || !/^\/\//{ started = 1; print }' "$1"; }
code "$tcp" >"$tmp/tcp"
code "$rdma" >"$tmp/rdma"
diff -U1 --label "$tcp" --label "$rdma" "$tmp/tcp" "$tmp/rdma" >"$tmp/diff" || true
if [ -z "$max" ]; then
    cat "$tmp/diff"
    exit 0
fi
[ -s "$tmp/diff" ] || { echo "FAILED: $rdma does not differ from $tcp"; exit 1; }
changed=$(grep -c '^+[^+]\|^+$' "$tmp/diff" || true)
cat "$tmp/diff"
if [ "$changed" -gt "$max" ]; then
    echo "FAILED: $rdma changes $changed lines of $tcp (at most $max)"
    exit 1
fi
echo "ok: $rdma changes $changed lines of $tcp (at most $max)"

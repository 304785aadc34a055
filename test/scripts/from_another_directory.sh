#!/bin/sh
# The commands the README names, started from a directory outside the checkout by a
# relative path (so that $0 is relative and means nothing once they change
# directory): each must find its checkout. --help shows it cheaply, as each prints
# its own header comment read from the checkout's root.
#
#   from_another_directory.sh SOURCE_DIR
set -u
src=$(cd "${1:?usage: from_another_directory.sh SOURCE_DIR}" && pwd -P) || exit 1
elsewhere=$(mktemp -d "${TMPDIR:-/tmp}/rdma_asio_elsewhere.XXXXXX") || exit 1
trap 'rm -rf "$elsewhere"' EXIT
cd "$elsewhere" || exit 1
failed=0
for script in scripts/run-sample scripts/run-tests bench/run.sh; do
    rel=$(realpath --relative-to=. "$src/$script")
    out=$("$rel" --help 2>&1)
    rc=$?
    # The usage line each header carries, e.g. "  scripts/run-sample [--help]".
    if [ "$rc" -ne 0 ] || ! printf '%s\n' "$out" | grep -qF "  $script ["; then
        echo "FAILED: $rel --help (from $elsewhere): exit status $rc, output:"
        printf '%s\n' "$out"
        failed=1
    else
        echo "ok: $rel --help"
    fi
done
exit $failed

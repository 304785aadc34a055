#!/bin/sh
# Checks that every code snippet in docs/ is a copy of compiled code.
#
# A snippet is announced in Markdown by a line
#     <!-- snippet: PATH#NAME -->
# followed by a fenced block. PATH (relative to the source tree) must hold the
# region between "// snippet-begin: NAME" and "// snippet-end" ("# snippet-begin:
# NAME" and "# snippet-end" in CMake and shell files), and the block must equal it
# line for line once the region's common indentation is removed.
#
# A diff is announced by a line
#     <!-- diff: OLD NEW -->
# followed by a fenced block that must equal test/samples/from_tcp_diff.sh OLD NEW
# (the change from a TCP sample to its RDMA form, docs/from-tcp.md).
set -eu
src=${1:?usage: check-snippets.sh SOURCE_DIR}
cd "$src"
status=0 checked=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for doc in README.md docs/*.md; do
    [ -f "$doc" ] || continue
    grep -n '<!-- snippet: [^ ]*#[^ ]* -->' "$doc" | while IFS=: read -r line rest; do
        ref=$(echo "$rest" | sed 's/.*<!-- snippet: \([^ ]*\) -->.*/\1/')
        file=${ref%%#*} name=${ref#*#}
        # The fenced block right after the marker.
        awk -v start="$line" 'NR > start && /^```/ { if (in_block) exit; in_block = 1; next }
                              in_block { print }' "$doc" >"$tmp/doc"
        if [ ! -f "$file" ]; then
            echo "$doc:$line: $file does not exist"
            echo fail >>"$tmp/failed"
            continue
        fi
        awk -v name="$name" '$0 ~ "(//|#) snippet-begin: " name "$" { on = 1; next }
                             on && /(\/\/|#) snippet-end/ { exit }
                             on { print }' "$file" >"$tmp/raw"
        # Remove the region's common indentation.
        indent=$(awk 'NF { match($0, /^ */); if (min == "" || RLENGTH < min) min = RLENGTH }
                      END { print min + 0 }' "$tmp/raw")
        cut -c"$((indent + 1))"- "$tmp/raw" >"$tmp/code"
        if [ ! -s "$tmp/code" ]; then
            echo "$doc:$line: no snippet '$name' in $file"
            echo fail >>"$tmp/failed"
        elif ! diff -u "$tmp/code" "$tmp/doc" >"$tmp/diff"; then
            echo "$doc:$line: snippet $ref differs from the code:"
            cat "$tmp/diff"
            echo fail >>"$tmp/failed"
        fi
        echo ok >>"$tmp/checked"
    done
done
for doc in README.md docs/*.md; do
    [ -f "$doc" ] || continue
    grep -n '<!-- diff: [^ ]* [^ ]* -->' "$doc" | while IFS=: read -r line rest; do
        set -- $(echo "$rest" | sed 's/.*<!-- diff: \([^ ]*\) \([^ ]*\) -->.*/\1 \2/')
        awk -v start="$line" 'NR > start && /^```/ { if (in_block) exit; in_block = 1; next }
                              in_block { print }' "$doc" >"$tmp/doc"
        if [ ! -f "$1" ] || [ ! -f "$2" ]; then
            echo "$doc:$line: $1 or $2 does not exist"
            echo fail >>"$tmp/failed"
        elif ! test/samples/from_tcp_diff.sh "$1" "$2" | diff -u - "$tmp/doc" >"$tmp/diff"; then
            echo "$doc:$line: the diff of $1 and $2 differs from the files':"
            cat "$tmp/diff"
            echo fail >>"$tmp/failed"
        fi
        echo ok >>"$tmp/checked"
    done
done
checked=$(cat "$tmp/checked" 2>/dev/null | wc -l)
if [ -s "$tmp/failed" ]; then
    echo "check-snippets: $(wc -l <"$tmp/failed") of $checked snippets are not copies of compiled code"
    exit 1
fi
[ "$checked" -gt 0 ] || { echo "check-snippets: no snippets found"; exit 1; }
echo "check-snippets: $checked snippets match compiled code"

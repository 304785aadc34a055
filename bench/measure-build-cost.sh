#!/bin/sh
# What rdma_asio::stream costs a program at build time: bench/build_cost_kv.cpp, a
# line-based key-value service, compiled over Asio's TCP socket and over
# rdma_asio::stream (-DKV_OVER_RDMA=1), as a user compiles it against the installed
# package (pkg-config, RelWithDebInfo's -O2 -g), without ccache; then linked, and the
# programs' sizes. Runs on the host (no device needed). Prints a Markdown table.
#
#   bench/measure-build-cost.sh BUILD_DIR [ROUNDS]
#
# BUILD_DIR: a build tree with the library built (installed into a temporary prefix
# here), shared by default or static (-DBUILD_SHARED_LIBS=OFF): the table says which
# the program was linked against. ROUNDS (3): compilations of each variant, interleaved; the table gives the
# median and the range. CXX (c++) is the compiler.
set -eu
build=$1
rounds=${2:-3}
cxx=${CXX:-c++}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/share/pkgconfig"
cflags=$(pkg-config --cflags rdma_asio)
libs=$(pkg-config --libs rdma_asio)
libdir=$(pkg-config --variable=libdir rdma_asio)
if [ "${STRIP_LIBRARY:-0}" = 1 ] && [ -e "$libdir/librdma_asio.a" ]; then
    strip -g "$libdir/librdma_asio.a"
fi
flags="-std=c++20 -O2 -g -DNDEBUG"

# compile VARIANT DEFINE: one compilation; appends "seconds-wall seconds-cpu" to VARIANT's file.
compile() {
    /usr/bin/time -f "%e %U %S" -o "$work/time" \
        $cxx $flags $cflags $2 -c "$here/build_cost_kv.cpp" -o "$work/$1.o"
    awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$work/time" >>"$work/$1.times"
}
i=0
while [ "$i" -lt "$rounds" ]; do
    compile tcp ""
    compile stream "-DKV_OVER_RDMA=1"
    i=$((i + 1))
done
$cxx $flags "$work/tcp.o" -o "$work/tcp" -pthread
$cxx $flags "$work/stream.o" -o "$work/stream" $libs

# summary VARIANT COLUMN: "median (min-max)" of column COLUMN of VARIANT's times.
summary() {
    cut -d' ' -f"$2" "$work/$1.times" | sort -n |
        awk '{ v[NR] = $1 } END { printf "%.1f (%.1f-%.1f)", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
median() {
    cut -d' ' -f"$2" "$work/$1.times" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
if [ -e "$libdir/librdma_asio.so" ]; then library="shared library"; else library="static library"; fi
if [ "${STRIP_LIBRARY:-0}" = 1 ] && [ "$library" = "static library" ]; then
    library="static library, its debug information stripped"
fi
strip -o "$work/tcp.stripped" "$work/tcp"
strip -o "$work/stream.stripped" "$work/stream"
size_tcp=$(stat -c %s "$work/tcp")
size_stream=$(stat -c %s "$work/stream")
# row LABEL A B: a row of two figures and their ratio.
row() {
    echo "| $1 | $2 | $3 | $(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.2fx", b / a }') |"
}
text() { size "$1" | awk 'NR == 2 { print $1 }'; }
echo "| $(uname -m), $($cxx --version | head -n 1), $rounds rounds | over Asio's TCP socket | over rdma_asio::stream ($library) | ratio |"
echo "| --- | ---: | ---: | ---: |"
echo "| compile, wall seconds: median (range) | $(summary tcp 1) | $(summary stream 1) | $(awk -v a="$(median tcp 1)" -v b="$(median stream 1)" 'BEGIN { printf "%.2fx", b / a }') |"
echo "| compile, CPU seconds: median (range) | $(summary tcp 2) | $(summary stream 2) | $(awk -v a="$(median tcp 2)" -v b="$(median stream 2)" 'BEGIN { printf "%.2fx", b / a }') |"
row "program, bytes (-O2 -g)" "$size_tcp" "$size_stream"
row "program, bytes stripped" "$(stat -c %s "$work/tcp.stripped")" "$(stat -c %s "$work/stream.stripped")"
row "program text (\`size\`)" "$(text "$work/tcp")" "$(text "$work/stream")"
row "the file's own object, bytes" "$(stat -c %s "$work/tcp.o")" "$(stat -c %s "$work/stream.o")"
row "the file's own object, text" "$(text "$work/tcp.o")" "$(text "$work/stream.o")"

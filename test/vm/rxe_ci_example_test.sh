#!/bin/sh
# The example of a user's rxe CI (examples/rxe-ci) against the installed package,
# as docs/testing-your-code.md tells a user to do it: installs rdma_asio from
# BUILD_DIR into a private prefix, builds the example with find_package(rdma_asio),
# runs its `ctest -L rxe`, which boots the test VM through the installed
# rdma-asio-vm, and checks that both of its test cases ran there and passed.
#
#   rxe_ci_example_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -u
build=${1:?usage: rxe_ci_example_test.sh BUILD_DIR SOURCE_DIR WORK_DIR}
src=${2:?} work=${3:?}
rm -rf "$work"
mkdir -p "$work" || exit 1
fail() { echo "FAILED: $*"; exit 1; }

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "cmake --install"; }
[ -x "$work/prefix/bin/rdma-asio-vm" ] || fail "no rdma-asio-vm installed in $work/prefix/bin"
cmake -S "$src/examples/rxe-ci" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
    >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring the example"; }
cmake --build "$work/build" -j2 >"$work/build.log" 2>&1 ||
    { tail -n 40 "$work/build.log"; fail "building the example"; }

# The guest must be booted for it: nothing here may pretend to be a device.
out=$(cd "$work" && env -u RDMA_ASIO_IN_GUEST ctest --test-dir "$work/build" -L rxe -V \
    --timeout 1200 2>&1)
rc=$?
# Without the colours of Catch2's output (the guest's console is a terminal).
out=$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g')
echo "$out" | tail -n 25
[ $rc = 0 ] || fail "the example's ctest -L rxe exited with $rc"
echo "$out" | grep -q "rdma_asio guest: running" || fail "the example's tests did not run in the test VM"
echo "$out" | grep -q "All tests passed (.* in 2 test cases)" ||
    fail "the example's two test cases did not both pass"
echo "$out" | grep -q "100% tests passed, 0 tests failed out of 1" || fail "ctest's summary"
echo "rxe CI example: installed package, rdma_asio_add_rxe_tests and rdma-asio-vm work for a user's project"

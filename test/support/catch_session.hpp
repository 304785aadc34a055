// The one translation unit that compiles Catch2's implementation, shared by every
// test program: Catch2 2.x is a single header whose implementation (and
// Catch::Session) is compiled wherever CATCH_CONFIG_RUNNER is defined, about half a
// minute per compile; each program's main.cpp calls this instead of compiling it again.
#pragma once

#include <functional>

namespace rdma_asio::test {

/// Runs the tests named on the command line (Catch2's options). `before_tests` runs
/// after the command line is read and before any test, and not when the command only
/// lists tests, tags or reporters or shows the help: a check there (is the device
/// present?) must not fail a listing (catch_discover_tests lists at build time). When
/// it returns other than 0, no test runs and that is the exit status.
/// Returns the process's exit status.
int run_catch_session(int argc, char* argv[], const std::function<int()>& before_tests = {});

} // namespace rdma_asio::test

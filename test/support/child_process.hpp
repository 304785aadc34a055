// Child processes for tests, with every wait bounded: a test that starts a program
// (e.g. `rdma link delete`) must fail with a clear message when the program does
// not end, never hang, in any runner layout.
#pragma once

#include <chrono>
#include <string>

#include <sys/types.h>

namespace rdma_asio::test {

/// Starts argv[0] (searched in PATH) with argv; returns its pid, or -1.
pid_t spawn(const char* const argv[]);

/// How a bounded wait for a child ended.
struct exit_result {
    enum class how {
        exited, // ended by itself; `code` is its exit status (128 + signal if killed by one)
        killed, // still running at the deadline, killed and reaped
        stuck,  // still running at the deadline and not even SIGKILL ended it: it is
                // blocked in the kernel (uninterruptible); left behind, not reaped
    } state = how::exited;
    int code = 0;

    bool ok() const noexcept { return state == how::exited && code == 0; }
    /// "exit status 3", "still running after 15 s, killed", ...
    std::string describe() const;
};

/// Waits up to `timeout` for child `pid` to end; past the deadline sends SIGKILL
/// and waits up to `kill_grace` more for it to go.
exit_result wait_exit(pid_t pid, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds kill_grace = std::chrono::seconds(5));

} // namespace rdma_asio::test

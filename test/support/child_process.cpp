#include "child_process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace rdma_asio::test {
namespace {

using clock = std::chrono::steady_clock;

// Reaps `pid` if it ends before `deadline`; false if it is still there.
bool reap_until(pid_t pid, clock::time_point deadline, int& status) {
    for (;;) {
        const pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid || r < 0)
            return true; // r < 0: not our child any more (already reaped)
        if (clock::now() >= deadline)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

} // namespace

pid_t spawn(const char* const argv[]) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::execvp(argv[0], const_cast<char* const*>(argv));
        ::_exit(127);
    }
    return pid;
}

exit_result wait_exit(pid_t pid, std::chrono::milliseconds timeout,
                      std::chrono::milliseconds kill_grace) {
    exit_result r;
    int status = 0;
    if (reap_until(pid, clock::now() + timeout, status)) {
        r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return r;
    }
    ::kill(pid, SIGKILL);
    // A process blocked in the kernel (D state) ignores even SIGKILL: an unbounded
    // waitpid here would hang the test with it.
    r.state = reap_until(pid, clock::now() + kill_grace, status) ? exit_result::how::killed
                                                                 : exit_result::how::stuck;
    r.code = -1;
    return r;
}

std::string exit_result::describe() const {
    switch (state) {
    case how::exited:
        return "exit status " + std::to_string(code);
    case how::killed:
        return "still running at the deadline, killed";
    case how::stuck:
        return "still running at the deadline and unkillable (blocked in the kernel), left behind";
    }
    return "?";
}

} // namespace rdma_asio::test

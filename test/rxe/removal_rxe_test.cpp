// Runs last: it deletes rxe0 and creates it again.
#include "rdma_asio/async_event_stream.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"
#include "verbs_resources.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

using namespace std::chrono_literals;
using rdma_asio::errc;
using rdma_asio::event_type;

namespace {

pid_t spawn(const char* const argv[]) {
    pid_t pid = ::fork();
    if (pid == 0) {
        ::execvp(argv[0], const_cast<char* const*>(argv));
        ::_exit(127);
    }
    return pid;
}

// Exit status of `pid`, or -1 when it is still running after `timeout` (then killed).
int wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return -1;
        }
        std::this_thread::sleep_for(20ms);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace

TEST_CASE("rdma link delete: the waiting coroutine sees the removal, then the delete completes",
          "[async_event_stream][removal]") {
    REQUIRE(rdma_asio::test::test_device_name() == "rxe0"); // it deletes and re-creates rxe0
    asio::io_context ioc;
    auto ctx = std::make_unique<rdma_asio::context>("rxe0");
    auto stream = std::make_unique<rdma_asio::async_event_stream>(ioc, *ctx);
    REQUIRE(stream->watching_removal());

    event_type removal{};
    std::error_code after;
    bool closed = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            rdma_asio::async_event ev = co_await stream->async_next(asio::use_awaitable);
            removal = ev.type();
            auto [ec, none] =
                co_await stream->async_next(asio::experimental::as_tuple(asio::use_awaitable));
            after = ec;
            // What a program does on removal: close everything on the device.
            stream.reset();
            ctx.reset();
            closed = true;
        },
        asio::detached);
    ioc.poll();

    const char* const del[] = {"rdma", "link", "delete", "rxe0", nullptr};
    pid_t pid = spawn(del);
    ioc.run_for(10s);
    CHECK(removal == event_type::device_removed);
    CHECK(after == errc::device_removed);
    CHECK(closed);

    // The kernel finishes the delete once the context is closed.
    const int status = wait_exit(pid, 15s);
    CHECK(status == 0);

    // Leave rxe0 as the VM set it up, for whatever runs next.
    rdma_asio::test::run_command("rdma link add rxe0 type rxe netdev veth0");
    rdma_asio::context again("rxe0");
    CHECK(rdma_asio::test::wait_port_state(again.native_handle(), IBV_PORT_ACTIVE, 10s));
}

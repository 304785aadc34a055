// Runs last: it deletes rxe0 and creates it again.
#include "rdma_asio/async_event_stream.hpp"
#include "rdma_asio/cm_id.hpp"
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"
#include "verbs_resources.hpp"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/io_context.hpp>
#include <asio/use_awaitable.hpp>

#include <arpa/inet.h>
#include <poll.h>
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

namespace {

// The child's side: two ids bound to rxe0's address, a listening one and a
// plain one; writes a byte to `ready` once they exist, then expects
// DEVICE_REMOVAL on each. Exit status 0 when both got it.
int cm_ids_see_removal(int ready) {
    asio::io_context ioc;
    rdma_asio::cm_event_channel channel(ioc);
    rdma_asio::cm_id listener(channel);
    rdma_asio::cm_id plain(channel);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, "10.0.0.1", &addr.sin_addr);
    listener.bind(reinterpret_cast<const sockaddr*>(&addr));
    listener.listen();
    plain.bind(reinterpret_cast<const sockaddr*>(&addr));

    std::error_code request_ec;
    rdma_cm_event_type plain_event = RDMA_CM_EVENT_ESTABLISHED;
    int done = 0;
    listener.async_get_request([&](std::error_code ec, rdma_asio::cm_id) {
        request_ec = ec;
        ++done;
    });
    plain.async_next([&](std::error_code ec, rdma_asio::cm_event ev) {
        if (!ec)
            plain_event = ev.type();
        ++done;
    });
    const char byte = 1;
    if (::write(ready, &byte, 1) != 1)
        return 3;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (done < 2 && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    if (done < 2)
        return 4;
    if (request_ec != errc::device_removed)
        return 5;
    if (plain_event != RDMA_CM_EVENT_DEVICE_REMOVAL)
        return 6;
    return 0;
}

} // namespace

TEST_CASE("rdma link delete: each cm id on the device gets DEVICE_REMOVAL", "[cm_id][removal]") {
    REQUIRE(rdma_asio::test::test_device_name() == "rxe0");
    // librdmacm keeps a context of its own on every device until the process ends,
    // and the delete waits for it: the ids live in a child process.
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    pid_t child = ::fork();
    if (child == 0) {
        ::close(pipe_fds[0]);
        int status = 2;
        try {
            status = cm_ids_see_removal(pipe_fds[1]);
        } catch (...) {
        }
        ::_exit(status);
    }
    ::close(pipe_fds[1]);
    pollfd ready{pipe_fds[0], POLLIN, 0};
    REQUIRE(::poll(&ready, 1, 10000) == 1);
    ::close(pipe_fds[0]);

    const char* const del[] = {"rdma", "link", "delete", "rxe0", nullptr};
    pid_t deleter = spawn(del);
    const int child_status = wait_exit(child, 20s);
    CAPTURE(child_status); // 4: no event; 5: the listener's wait; 6: the other id's
    CHECK(child_status == 0);
    CHECK(wait_exit(deleter, 15s) == 0);

    rdma_asio::test::run_command("rdma link add rxe0 type rxe netdev veth0");
    rdma_asio::context again("rxe0");
    CHECK(rdma_asio::test::wait_port_state(again.native_handle(), IBV_PORT_ACTIVE, 10s));
}

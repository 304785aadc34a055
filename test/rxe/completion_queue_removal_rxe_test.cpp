// Deletes rxe0 and creates it again: runs with the other removal tests, last.
#include "rdma_asio/completion_queue.hpp"
#include "rdma_asio/error.hpp"

#include <catch2/catch.hpp>

#include "test_device.hpp"
#include "verbs_resources.hpp"

#include <asio/io_context.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <memory>
#include <thread>

using namespace std::chrono_literals;
using rdma_asio::errc;

namespace {

// Exit status of `pid`, or -1 when it has not ended within `timeout` (then it
// is killed; a process stuck in the kernel may not die, so that wait is bounded
// too).
int wait_child(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    for (;;) {
        if (::waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (std::chrono::steady_clock::now() > deadline)
            break;
        std::this_thread::sleep_for(20ms);
    }
    ::kill(pid, SIGKILL);
    for (int i = 0; i < 50 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
        std::this_thread::sleep_for(20ms);
    return -1;
}

// The child's side: a channel with two CQs, one waiting in async_poll, one in
// async_wait_event, and no async_event_stream. Writes a byte to `ready` once
// both wait, then expects both to end with device_removed, and a later wait too.
// Exit status 0 when all held; the objects are closed on the way out, which lets
// the delete finish.
int cq_waits_see_removal(int ready) {
    asio::io_context ioc;
    auto ctx = std::make_unique<rdma_asio::context>("rxe0");
    auto channel = std::make_unique<rdma_asio::completion_channel>(ioc, *ctx);
    if (!channel->watching_removal())
        return 2;
    auto polled = std::make_unique<rdma_asio::completion_queue>(*channel, 4);
    auto waited = std::make_unique<rdma_asio::completion_queue>(*channel, 4);
    std::array<ibv_wc, 4> wcs;
    std::error_code poll_ec, wait_ec;
    int done = 0;
    polled->async_poll(wcs, [&](std::error_code ec, std::size_t) { poll_ec = ec, ++done; });
    waited->request_notify();
    waited->async_wait_event([&](std::error_code ec) { wait_ec = ec, ++done; });
    ioc.poll();
    const char byte = 1;
    if (::write(ready, &byte, 1) != 1)
        return 3;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (done < 2 && std::chrono::steady_clock::now() < deadline)
        ioc.run_one_for(20ms);
    if (done < 2)
        return 4;
    if (poll_ec != errc::device_removed || wait_ec != errc::device_removed)
        return 5;
    std::error_code later_ec;
    polled->async_poll(wcs, [&](std::error_code ec, std::size_t) { later_ec = ec, ++done; });
    ioc.restart();
    ioc.run_for(2s);
    if (done != 3 || later_ec != errc::device_removed)
        return 6;
    polled.reset();
    waited.reset();
    channel.reset();
    ctx.reset();
    return 0;
}

} // namespace

TEST_CASE("rdma link delete: CQ waits end with device_removed without an event stream",
          "[completion_queue][removal]") {
    REQUIRE(rdma_asio::test::test_device_name() == "rxe0"); // it deletes and re-creates rxe0
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::close(ready[0]);
        ::_exit(cq_waits_see_removal(ready[1]));
    }
    ::close(ready[1]);
    char byte = 0;
    const bool child_ready = ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    REQUIRE(child_ready);

    const pid_t del = ::fork();
    REQUIRE(del >= 0);
    if (del == 0) {
        ::execlp("rdma", "rdma", "link", "delete", "rxe0", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    // 0: both waits ended with device_removed, a later wait too; 4: they never
    // ended (the delete then waits for the child's context for ever).
    CHECK(wait_child(child, 20s) == 0);
    CHECK(wait_child(del, 20s) == 0);

    rdma_asio::test::run_command("rdma link add rxe0 type rxe netdev veth0");
    rdma_asio::context again("rxe0");
    CHECK(rdma_asio::test::wait_port_state(again.native_handle(), IBV_PORT_ACTIVE, 10s));
}

// The fixtures' teardown check (test/support/nothing_pending.hpp): it must see a
// wait left armed, and must not mistake a cancelled wait whose completion the
// kernel is still delivering for one left behind. The second case is io_uring's:
// a poll armed on a thread that has exited since is completed by a kernel worker,
// after cancel() has returned (it failed in 200 of 200 tries with a single poll()).
#include <catch2/catch.hpp>

#include "nothing_pending.hpp"
#include "recorder.hpp"

#include "asio_alias.hpp"

#include <unistd.h>

#include <chrono>
#include <thread>

namespace {

using namespace std::chrono_literals;

// A pipe nobody writes to: a read wait on it stays armed until cancelled.
struct quiet_pipe {
    quiet_pipe() { REQUIRE(::pipe(fds) == 0); }
    ~quiet_pipe() {
        ::close(fds[0]);
        ::close(fds[1]);
    }
    int fds[2] = {-1, -1};
};

// Cancels the wait on `d`: nothing_pending() must then see it finished, its handler
// run once with operation_aborted. Leaves the fd to its pipe.
void cancel_and_check(asio::io_context& ioc, asio::posix::stream_descriptor& d,
                      rdma_asio::test::recorder<>& waited) {
    d.cancel();
    CHECK(rdma_asio::test::nothing_pending(ioc));
    CHECK(waited.calls() == 1);
    CHECK(waited.ec() == asio::error::operation_aborted);
    (void)d.release();
}

} // namespace

TEST_CASE("nothing_pending reports a wait left armed, and a cancelled one as finished",
          "[nothing_pending]") {
    quiet_pipe pipe;
    asio::io_context ioc;
    asio::posix::stream_descriptor d(ioc, pipe.fds[0]);
    rdma_asio::test::recorder<> waited;
    d.async_wait(asio::posix::stream_descriptor::wait_read, waited.handler());
    ioc.poll(); // submits the wait to the kernel (io_uring) or registers it (epoll)
    CHECK_FALSE(rdma_asio::test::nothing_pending(ioc, 50ms));
    CHECK(waited.calls() == 0);
    cancel_and_check(ioc, d, waited);
}

TEST_CASE("nothing_pending: a wait armed on a thread that has exited, then cancelled, is "
          "finished once its completion arrives",
          "[nothing_pending]") {
    for (int attempt = 0; attempt < 20; ++attempt) {
        INFO("attempt " << attempt);
        quiet_pipe pipe;
        asio::io_context ioc;
        asio::posix::stream_descriptor d(ioc, pipe.fds[0]);
        rdma_asio::test::recorder<> waited;
        // The wait is started and submitted on a helper thread, which then exits.
        asio::post(ioc, [&] {
            d.async_wait(asio::posix::stream_descriptor::wait_read, waited.handler());
        });
        std::thread helper([&] { ioc.run_for(20ms); });
        helper.join();
        REQUIRE(waited.calls() == 0);
        cancel_and_check(ioc, d, waited);
    }
}

#include "rdma_asio/cm_event_channel.hpp"

#include <catch2/catch.hpp>

#include "recorder.hpp"
#include "run_coroutine.hpp"

#include "asio_alias.hpp"

#include <chrono>
#include <fstream>
#include <string>
#include <system_error>
#include <type_traits>

namespace cm_event_channel_test {

using namespace std::chrono_literals;
using rdma_asio::test::recorder;

namespace {
bool have_rdma_cm() {
    return std::ifstream("/dev/infiniband/rdma_cm").good();
}
} // namespace

TEST_CASE("a channel typed on io_context's executor: error-code open, a closed channel's wait, "
          "a converting move",
          "[cm_event_channel]") {
    using executor = asio::io_context::executor_type;
    using typed_channel = rdma_asio::basic_cm_event_channel<executor>;
    static_assert(std::is_same_v<typed_channel::executor_type, executor>);
    static_assert(std::is_same_v<rdma_asio::cm_event_channel::rebind_executor<executor>::other,
                                 typed_channel>);
    static_assert(std::is_same_v<typed_channel::native_handle_type, rdma_event_channel*>);
    static_assert(!std::is_copy_constructible_v<typed_channel>);
    static_assert(std::is_nothrow_move_constructible_v<typed_channel>);
    static_assert(std::is_nothrow_constructible_v<rdma_asio::cm_event_channel, typed_channel&&>);

    asio::io_context ioc;
    rdma_asio::error_code ec = asio::error::timed_out; // cleared by a successful open
    typed_channel channel(ioc, ec);
    const bool opened = have_rdma_cm();
    CHECK(channel.is_open() == opened);
    CHECK((channel.native_handle() != nullptr) == opened);
    if (opened) {
        CHECK_FALSE(ec);
        channel.open(ec);
        CHECK(ec == asio::error::already_open);
        CHECK(channel.is_open());
    } else {
        CHECK(ec); // no rdma_cm here: the channel stays closed, nothing thrown
        try {
            channel.open();
            FAIL("open() succeeded without /dev/infiniband/rdma_cm");
        } catch (const rdma_asio::system_error& e) {
            CHECK(e.code() == ec);
            CHECK(std::string(e.what()).find("rdma_create_event_channel") != std::string::npos);
        }
    }

    // A moved-from channel is closed and keeps its executor; its wait completes
    // with bad_descriptor on that executor (the handler has none of its own).
    typed_channel moved(std::move(channel));
    CHECK_FALSE(channel.is_open());
    CHECK(channel.native_handle() == nullptr);
    CHECK(channel.get_executor() == ioc.get_executor());
    channel.cancel(); // not open: nothing to do
    recorder<rdma_asio::cm_event> closed_wait;
    channel.async_next(closed_wait.handler());
    CHECK(closed_wait.calls() == 0); // never inside the initiating call
    ioc.run_for(5s);
    REQUIRE(closed_wait.calls() == 1);
    CHECK(closed_wait.ec() == asio::error::bad_descriptor);
    CHECK_FALSE(closed_wait.value());

    // as_default_on: a wait without a token is an awaitable.
    auto awaiting = asio::use_awaitable.as_default_on(std::move(channel));
    rdma_asio::error_code awaited;
    ioc.restart();
    rdma_asio::test::run_coroutine(ioc, [&]() -> asio::awaitable<void> {
        try {
            co_await awaiting.async_next();
        } catch (const rdma_asio::system_error& e) {
            awaited = e.code();
        }
    }());
    CHECK(awaited == asio::error::bad_descriptor);

    // Back to any_io_executor by a converting move.
    rdma_asio::cm_event_channel erased(std::move(moved));
    CHECK(erased.is_open() == opened);
    CHECK_FALSE(moved.is_open());
    CHECK(erased.get_executor() == ioc.get_executor());
    if (opened) {
        // close() ends the object's own waits.
        recorder<rdma_asio::cm_event> pending;
        erased.async_next(pending.handler());
        erased.close();
        ioc.restart();
        ioc.run_for(5s);
        REQUIRE(pending.calls() == 1);
        CHECK(pending.ec() == asio::error::operation_aborted);
    }
    erased.close();
    erased.close(); // idempotent
    CHECK_FALSE(erased.is_open());
}

} // namespace cm_event_channel_test

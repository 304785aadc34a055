#include "rdma_asio/completion_channel.hpp"

#include <catch2/catch.hpp>

#include "asio_alias.hpp"

#include <string>
#include <system_error>
#include <type_traits>

namespace completion_channel_test {

namespace {

using typed_channel = rdma_asio::basic_completion_channel<asio::io_context::executor_type>;

static_assert(std::is_nothrow_move_constructible_v<rdma_asio::completion_channel>);
static_assert(!std::is_copy_constructible_v<rdma_asio::completion_channel>);
static_assert(std::is_same_v<rdma_asio::completion_channel::executor_type, asio::any_io_executor>);
static_assert(std::is_same_v<typed_channel::executor_type, asio::io_context::executor_type>);
static_assert(
    std::is_same_v<
        rdma_asio::completion_channel::rebind_executor<asio::io_context::executor_type>::other,
        typed_channel>);
static_assert(std::is_same_v<typed_channel::native_handle_type, ibv_comp_channel*>);
static_assert(std::is_constructible_v<rdma_asio::completion_channel, asio::io_context&,
                                      const rdma_asio::context&>);
static_assert(std::is_constructible_v<typed_channel, asio::io_context&, ibv_context*>);
// A typed channel converts to the any_io_executor one, not the other way round.
static_assert(std::is_nothrow_constructible_v<rdma_asio::completion_channel, typed_channel&&>);
static_assert(std::is_nothrow_assignable_v<rdma_asio::completion_channel&, typed_channel&&>);
static_assert(!std::is_constructible_v<typed_channel, rdma_asio::completion_channel&&>);

} // namespace

TEST_CASE("a closed completion channel: no handle, queries throw bad_descriptor",
          "[completion_channel]") {
    asio::io_context ioc;
    typed_channel channel(ioc);
    CHECK_FALSE(channel.is_open());
    CHECK(channel.native_handle() == nullptr);
    CHECK(channel.get_executor() == ioc.get_executor());
    channel.cancel(); // nothing to cancel
    channel.close();
    channel.close(); // idempotent
    try {
        (void)channel.counters();
        FAIL("counters() of a closed channel");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("completion_channel") != std::string::npos);
    }
    try {
        (void)channel.watching_removal();
        FAIL("watching_removal() of a closed channel");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
    }

    // A converting move keeps the executor and the (closed) state.
    rdma_asio::completion_channel erased(std::move(channel));
    CHECK_FALSE(erased.is_open());
    CHECK(erased.get_executor() == asio::any_io_executor(ioc.get_executor()));
}

TEST_CASE("a completion channel's open reports errors as error codes", "[completion_channel]") {
    asio::io_context ioc;
    rdma_asio::completion_channel channel(ioc);
    rdma_asio::error_code ec;
    rdma_asio::context closed;
    channel.open(closed, ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(channel.is_open());
    ec.clear();
    channel.open(static_cast<ibv_context*>(nullptr), ec);
    CHECK(ec == asio::error::bad_descriptor);
    CHECK_FALSE(channel.is_open());
    try {
        channel.open(closed);
        FAIL("a channel opened on a closed context");
    } catch (const rdma_asio::system_error& e) {
        CHECK(e.code() == asio::error::bad_descriptor);
        CHECK(std::string(e.what()).find("completion_channel::open") != std::string::npos);
    }
    // The constructors that open throw the same.
    CHECK_THROWS_AS(typed_channel(ioc, static_cast<ibv_context*>(nullptr)),
                    rdma_asio::system_error);
}

} // namespace completion_channel_test
